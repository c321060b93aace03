// Exit codes of the ulpcheck CLI, distinct per cause so CI can tell them apart.
#pragma once

#include <stdexcept>

namespace ulpcheck::exit_code {
inline constexpr int kOk = 0;
inline constexpr int kPropertyFailed = 1;  // a property failed (or a regression case did)
inline constexpr int kUsage = 2;           // malformed command-line arguments
inline constexpr int kBadCase = 3;         // malformed case string, case JSON or corpus file
inline constexpr int kRuntimeError = 4;    // a fault that ended the run (a sticky GPU error), memory that ran
                                           // out outside a case, a report or JSON-lines file not written
inline constexpr int kHang = 5;            // a case exceeded its time limit: in this process (the watchdog
                                           // ends the run) or in a worker (the kernel was killed, its case
                                           // failed, the run went on)
inline constexpr int kNothingRan = 6;      // the selection matched no kernel/property/dtype
inline constexpr int kNothingJudged = 7;   // a property that applies judged no case (every case skipped or
                                           // inconclusive), a plan's cell judged fewer cases than its target
                                           // (BELOW TARGET), a repro that judged nothing, or a property named
                                           // with --property applies to nothing selected
}  // namespace ulpcheck::exit_code

namespace ulpcheck {
/// Arguments that cannot work (a selection that matches no op, an option out
/// of range, an unwritable report file): exit_code::kUsage, said before any
/// case runs. Thrown by the CLI's parsing and by the commands it calls.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
}  // namespace ulpcheck
