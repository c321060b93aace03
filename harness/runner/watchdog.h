// The watchdog: ends the run with exit code 5 when a check runs longer than
// its limit. A hung kernel cannot be interrupted from inside the process;
// what was measured so far is already in the JSON-lines file.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "harness/runner/jsonl.h"

namespace ulpcheck {

/// Each thread that runs cases times its own check (cases run at once:
/// CampaignOptions::concurrent_cases).
class Watchdog {
 public:
  /// timeout_s 0: no limit (no thread).
  Watchdog(double timeout_s, JsonlWriter* json);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  /// Starts timing the calling thread's check, which may take `limit_s` (0:
  /// the campaign's timeout).
  void enter(const std::string& what, double limit_s = 0);
  void leave();

 private:
  struct Check {
    std::string what;
    std::chrono::steady_clock::time_point started;
    double limit_s = 0;
  };
  void loop();
  double timeout_s_;
  JsonlWriter* json_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::thread::id, Check> checks_;
  bool stop_ = false;
};

}  // namespace ulpcheck
