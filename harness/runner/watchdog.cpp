#include "harness/runner/watchdog.h"

#include <cstdio>
#include <cstdlib>

#include "harness/runner/exit_codes.h"

namespace ulpcheck {

Watchdog::Watchdog(double timeout_s, JsonlWriter* json) : timeout_s_(timeout_s), json_(json) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::enter(const std::string& what, double limit_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  checks_[std::this_thread::get_id()] = Check{what, std::chrono::steady_clock::now(),
                                              limit_s > 0 ? limit_s : timeout_s_};
}

void Watchdog::leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  checks_.erase(std::this_thread::get_id());
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(500));
    for (const auto& [thread, check] : checks_) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - check.started).count() <= check.limit_s)
        continue;
      std::fprintf(stderr, "\nulpcheck: case exceeded its %.0f s limit (hung kernel?): %s\n", check.limit_s,
                   check.what.c_str());
      if (json_) json_->write({{"type", "hang"}, {"timeout_s", check.limit_s}, {"what", check.what}});
      std::fflush(stderr);
      std::_Exit(exit_code::kHang);
    }
  }
}

}  // namespace ulpcheck
