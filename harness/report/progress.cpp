#include "harness/report/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace ulpcheck {

namespace {
constexpr double kRedrawSeconds = 0.1;    // a terminal bar at most ten times a second
constexpr double kQuietLineSeconds = 30;  // plain lines: at least one this often

int terminalColumns() {
  winsize w{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col >= 40) return w.ws_col;
  return 80;
}
}  // namespace

double etaSeconds(const CampaignProgress& p) {
  if (p.done <= 0 || p.total <= 0 || p.seconds <= 0) return -1;
  double eta = p.seconds / double(p.done) * double(std::max<int64_t>(0, p.total - p.done));
  if (p.time_budget_s > 0) eta = std::min(eta, std::max(0.0, p.time_budget_s - p.seconds));
  return eta;
}

std::string formatDuration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string formatProgressBar(const std::string& label, const CampaignProgress& p, int width) {
  const double eta = etaSeconds(p);
  const std::string tail = fmt::format(" {}/{} cases, {} failure{}, {}, ETA {}", p.done, p.total, p.failures,
                                       p.failures == 1 ? "" : "s", formatDuration(p.seconds),
                                       eta < 0 ? std::string("?") : formatDuration(eta));
  // The bar's width does not follow the figures' (it would jitter as they grow).
  constexpr int kTailRoom = 60;
  const int bar = std::clamp(width - int(label.size()) - kTailRoom, 0, 40);
  std::string out = label;
  if (bar >= 5) {
    const double fraction = p.total > 0 ? std::min(1.0, double(p.done) / double(p.total)) : 0.0;
    const int full = int(fraction * bar);
    out += " [" + std::string(full, '#') + std::string(bar - full, '.') + "]";
  }
  return out + tail;
}

ProgressReporter::ProgressReporter(std::string label, bool tty) : label_(std::move(label)), tty_(tty) {}

bool ProgressReporter::stderrIsTerminal() {
  const char* term = std::getenv("TERM");
  return isatty(STDERR_FILENO) && !(term && std::strcmp(term, "dumb") == 0);
}

void ProgressReporter::update(const CampaignProgress& p) {
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    const bool last = p.done >= p.total;
    if (!last && drawn_ && std::chrono::duration<double>(now - last_draw_).count() < kRedrawSeconds) return;
    last_draw_ = now;
    std::fprintf(stderr, "\r\033[K%s", formatProgressBar(label_, p, terminalColumns() - 1).c_str());
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  // Plain lines: each tenth of the way, and after a quiet stretch.
  const bool tenth = p.total > 0 && p.done * 10 >= int64_t(next_tenth_) * p.total;
  if (!tenth && p.seconds - last_line_s_ < kQuietLineSeconds) return;
  while (p.total > 0 && p.done * 10 >= int64_t(next_tenth_) * p.total) ++next_tenth_;
  last_line_s_ = p.seconds;
  std::printf("# %s\n", formatProgressBar(label_, p, 0).c_str());
  std::fflush(stdout);
}

void ProgressReporter::clear() {
  if (!tty_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

ProgressReporter::~ProgressReporter() { clear(); }

}  // namespace ulpcheck
