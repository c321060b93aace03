// A campaign's progress for the person waiting on it: on a terminal, one
// bar redrawn in place on stderr (cases done of planned, failures, elapsed,
// ETA); anywhere else (CI logs, pipes), a plain line on stdout at every
// tenth of the way and at least every 30 s, so a log never fills with
// carriage returns and never stays silent for long.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "harness/runner/campaign.h"

namespace ulpcheck {

/// Seconds left, from the rate so far (and the time budget, if sooner);
/// negative while nothing is known.
double etaSeconds(const CampaignProgress& p);

/// "1m05s", "12s": short durations for progress lines.
std::string formatDuration(double seconds);

/// The bar's text for `width` columns, e.g.
/// "rmsnorm [#######.....] 312/612 cases, 0 failures, 41s, ETA 38s".
std::string formatProgressBar(const std::string& label, const CampaignProgress& p, int width);

class ProgressReporter {
 public:
  /// `tty`: draw a bar in place on stderr; otherwise print plain lines on stdout.
  ProgressReporter(std::string label, bool tty);
  /// Whether stderr is a terminal ulpcheck may draw on ($TERM not "dumb").
  static bool stderrIsTerminal();

  void update(const CampaignProgress& p);
  /// Erases the bar (before other output; the next update redraws it).
  void clear();
  /// Erases the bar for good.
  ~ProgressReporter();

 private:
  std::string label_;
  bool tty_;
  bool drawn_ = false;
  int next_tenth_ = 1;
  double last_line_s_ = 0;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace ulpcheck
