#include "kernels/plugin/remote.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/cuda_ops.h"
#include "core/device.h"
#include "core/schedule_noise.h"
#include "core/shared_memory.h"
#include "kernels/door.h"
#include "kernels/plugin/plugin_loader.h"

namespace ulpcheck::remote {

using nlohmann::json;

namespace {

std::vector<std::string>& workerPlugins() {
  static std::vector<std::string> paths;
  return paths;
}

// ---------------------------------------------------------------------------
// Framing: a 4-byte little-endian length, then the JSON text.

bool writeAll(int fd, const char* p, size_t n) {
  while (n) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= size_t(w);
  }
  return true;
}

bool sendMessage(int fd, const json& j) {
  const std::string text = j.dump();
  const uint32_t n = uint32_t(text.size());
  const char len[4] = {char(n), char(n >> 8), char(n >> 16), char(n >> 24)};
  return writeAll(fd, len, 4) && writeAll(fd, text.data(), text.size());
}

/// Reads n bytes, waiting at most until `deadline` (none: forever). 1 read,
/// 0 the peer closed, -1 timed out, -2 an error.
using Clock = std::chrono::steady_clock;

// How long a new worker may take to load its plugins or Python libraries.
constexpr int kStartSeconds = 120;
int readAll(int fd, char* p, size_t n, const Clock::time_point* deadline) {
  while (n) {
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) return -1;
      pollfd pfd{fd, POLLIN, 0};
      const int ready = poll(&pfd, 1, int(std::min<long long>(left, 1 << 30)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) return -1;
      if (ready < 0) return -2;
    }
    const ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return 0;
    if (r < 0) return -2;
    p += r, n -= size_t(r);
  }
  return 1;
}

/// 1 and the message, 0 closed, -1 timed out, -2 error.
int receiveMessage(int fd, json& out, const Clock::time_point* deadline) {
  unsigned char len[4];
  if (const int r = readAll(fd, reinterpret_cast<char*>(len), 4, deadline); r != 1) return r;
  const uint32_t n = uint32_t(len[0]) | uint32_t(len[1]) << 8 | uint32_t(len[2]) << 16 | uint32_t(len[3]) << 24;
  std::string text(n, '\0');
  if (const int r = readAll(fd, text.data(), n, deadline); r != 1) return r;
  out = json::parse(text, nullptr, false);
  return out.is_discarded() ? -2 : 1;
}

// ---------------------------------------------------------------------------
// The coordinator's side.

/// Starts every child process (workers, probes) from one thread that lives as
/// long as the process. A child asks the kernel to kill it when the thread
/// that forked it ends (PR_SET_PDEATHSIG): forked from a case's thread it
/// would die with that thread, forked from here it dies with ulpcheck — a
/// SIGKILL, SIGTERM or SIGINT to the coordinator alone included — and never
/// runs on, holding a GPU, as an orphan.
class Spawner {
 public:
  static Spawner& instance() {
    static Spawner* s = new Spawner;  // never destroyed: its thread lives until the process ends
    return *s;
  }

  /// Forks and execs `argv`; in the child `keep_fd` stays open across exec
  /// and `stdout_fd` becomes its standard output. Returns the pid.
  pid_t spawn(std::vector<std::string> argv, int keep_fd, int stdout_fd) {
    std::packaged_task<pid_t()> task([argv = std::move(argv), keep_fd, stdout_fd]() mutable {
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      const pid_t parent = getpid();
      const pid_t pid = fork();
      if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
      if (pid == 0) {  // async-signal-safe calls only until exec
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);  // the coordinator is already gone
        if (keep_fd >= 0) fcntl(keep_fd, F_SETFD, 0);
        if (stdout_fd >= 0) dup2(stdout_fd, 1);
        execvp(args[0], args.data());
        _exit(127);
      }
      return pid;
    });
    std::future<pid_t> pid = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    wake_.notify_one();
    return pid.get();
  }

 private:
  Spawner() {
    std::thread([this] {
      for (;;) {
        std::packaged_task<pid_t()> task;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          wake_.wait(lock, [&] { return !tasks_.empty(); });
          task = std::move(tasks_.front());
          tasks_.pop_front();
        }
        task();
      }
    }).detach();
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<pid_t()>> tasks_;
};

/// What a short-lived child printed on its stdout, and how it ended.
struct ChildResult {
  int status = 0;  // waitpid's
  bool timed_out = false;
  std::string out;
};

/// Runs `argv` (from the Spawner) to its end, reading its stdout, killing it
/// after `timeout_s`. Its stderr is ours.
ChildResult runChild(const std::vector<std::string>& argv, double timeout_s) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  pid_t pid = -1;
  try {
    pid = Spawner::instance().spawn(argv, -1, fds[1]);
  } catch (...) {
    close(fds[0]), close(fds[1]);
    throw;
  }
  close(fds[1]);
  ChildResult r;
  const auto deadline = Clock::now() +
                        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (char buf[4096];;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = left > 0 ? poll(&pfd, 1, int(std::min<long long>(left, 1 << 30))) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {  // out of time (or poll failed): it ends now
      r.timed_out = ready == 0;
      kill(pid, SIGKILL);
      break;
    }
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.out.append(buf, size_t(n));
  }
  close(fds[0]);
  // A child that closed its output but goes on is waited for until the deadline, then killed.
  for (;;) {
    const pid_t done = waitpid(pid, &r.status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (done == 0 && Clock::now() > deadline) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return r;
}

std::string describeExit(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  return "ended";
}

thread_local ColdCalls t_cold_calls;  // coldCallsOnThisThread()

void countColdCall(std::string why) {
  ++t_cold_calls.count;
  t_cold_calls.last_why = std::move(why);
}

/// A worker process: started on the first call, again after one ended.
/// `command` gives its argv for a socket fd (the C++ worker, or Python's).
class Worker {
 public:
  using Command = std::function<std::vector<std::string>(int fd)>;
  explicit Worker(Command command) : command_(std::move(command)) {}
  ~Worker() { stop(); }

  /// A call sent, its reply not yet read.
  struct Pending {
    std::string what;
    double timeout = 0;
    Clock::time_point deadline;
    std::string cold_why;  // why it runs cold, if it does (coldCallsOnThisThread)
  };

  /// `compiles_per_shape`: the variant compiles on the first call of each
  /// (dtype, N, power-of-two bucket of M), which gets kCompileSeconds.
  json call(const json& request, const std::string& what, double timeout, bool compiles_per_shape = false) {
    if (!running()) start(what);
    Pending p = send(request, what, timeout, compiles_per_shape);
    json reply = receive(p);
    if (!p.cold_why.empty()) countColdCall(std::move(p.cold_why));
    return reply;
  }

  /// Sends a call to the running worker (start it first); receive() reads its reply.
  Pending send(const json& request, const std::string& what, double timeout, bool compiles_per_shape) {
    Pending p{what, timeout, {}, {}};
    if (called_.insert(request.at("variant").get<std::string>() + " " + request.at("entry").get<std::string>()).second)
      p.cold_why = "first call after its worker started";
    if (compiles_per_shape) {
      const json& s = request.at("shape");  // dtype, M, N, ld, eps
      // The spec too: a weight dtype or an absent parameter is another kernel to compile.
      const std::string key = fmt::format("{} {} {} {} {} {}", request.at("variant").get<std::string>(),
                                          request.at("entry").get<std::string>(), s.at(0).get<int>(),
                                          s.at(2).get<int64_t>(), std::bit_width(uint64_t(s.at(1).get<int64_t>())),
                                          request.value("spec", json::object()).dump());
      if (compiled_.insert(key).second) {
        p.timeout = std::max(p.timeout, kCompileSeconds);
        if (p.cold_why.empty()) p.cold_why = "first call of a shape it compiles for";
      }
    }
    // The coordinator's own GPU work on these buffers (poisoning outputs,
    // copying inputs in) is queued on its streams, which another process's
    // kernel is not ordered after: it must have finished before the call.
    // Without this, the coordinator's poison still in flight sometimes
    // overwrote a worker's results (whole outputs of 0x7fad in Liger and
    // torch runs on the H100, seen by determinism and batch invariance).
    for (const auto& region : request.at("regions"))
      if (region.at("where") != "host") {
        deviceSynchronize("before a worker call");
        break;
      }
    if (!sendMessage(fd_, request)) throw died(what);
    p.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(p.timeout));
    return p;
  }

  /// The reply to `p`'s call; throws KernelFailure where the worker failed
  /// it, died or did not answer by its deadline (then it is killed). A
  /// cold graph replay the worker reports is set in p.cold_why.
  json receive(Pending& p) {
    json reply;
    const int r = receiveMessage(fd_, reply, &p.deadline);
    if (r == -1) {
      stop();
      throw KernelFailure(fmt::format("{} did not return within {:g} s (a hang?): the worker was killed and will be "
                                      "restarted",
                                      p.what, p.timeout),
                          /*hung=*/true);
    }
    if (r != 1) throw died(p.what);
    if (reply.value("fatal", false)) stop();  // its CUDA context is lost: it exits, a new one starts next time
    if (!reply.value("ok", false)) throw KernelFailure(reply.value("error", std::string("(no message)")));
    // What only the worker knows, and the most precise: a captured CUDA graph's first replay.
    if (reply.value("cold", false)) p.cold_why = "first replay of the CUDA graph it captured for this shape";
    // Judged by memory_safety as if the kernel had run here (its outputs are
    // still collected: what the failed launch left unwritten shows).
    if (reply.contains("unchecked_launch")) reportWorkerUncheckedLaunch(reply.at("unchecked_launch"));
    return reply;
  }

  bool running() const { return pid_ >= 0; }
  int fd() const { return fd_; }

  /// Starts a worker and waits for it to say it is ready: loading its
  /// plugins or importing its Python libraries (torch alone takes seconds)
  /// does not count against the first call's timeout.
  void start(const std::string& what) {
    spawn();
    awaitReady(what, Clock::now() + std::chrono::seconds(kStartSeconds));
  }

  /// Starts the process without waiting for it (a rank group starts every
  /// rank before any can say ready: they meet each other first).
  void spawn() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throw std::runtime_error(fmt::format("socketpair: {}", std::strerror(errno)));
    // The worker: its end of the socket kept across exec, its stdout on our stderr.
    pid_t pid = -1;
    try {
      pid = Spawner::instance().spawn(command_(sv[1]), sv[1], 2);
    } catch (...) {
      close(sv[0]), close(sv[1]);
      throw;
    }
    close(sv[1]);
    pid_ = pid;
    fd_ = sv[0];
  }

  void awaitReady(const std::string& what, Clock::time_point deadline) {
    json hello;
    const int r = receiveMessage(fd_, hello, &deadline);
    if (r == 1 && hello.value("ready", false)) return;
    if (r == -1) stop();
    throw r == -1 ? KernelFailure(fmt::format("the worker for {} did not start within {} s", what, kStartSeconds))
                  : died(what);
  }

  void stop() {
    if (pid_ < 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    close(fd_);
    pid_ = -1, fd_ = -1;
    compiled_.clear();  // a new worker compiles again (from the library's disk cache, if it keeps one)
    called_.clear();    // and its first calls are cold again
  }

 private:
  KernelFailure died(const std::string& what) {
    close(fd_);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1, fd_ = -1;
    compiled_.clear();
    called_.clear();
    return KernelFailure(fmt::format("the worker running {} {}: the kernel crashed (the worker will be restarted)",
                                     what, describeExit(status)));
  }

  Command command_;
  pid_t pid_ = -1;
  std::set<std::string> compiled_;  // the shapes a compiling variant has been called with in this worker
  std::set<std::string> called_;    // the (variant, entry point)s called in this worker: the others' next call is cold
  int fd_ = -1;
};

/// The worker of the C++ plugins: this very executable, `ulpcheck worker`.
std::vector<std::string> pluginWorkerArgs(int fd) {
  std::vector<std::string> args{"/proc/self/exe", "worker", "--fd", std::to_string(fd)};
  for (const auto& p : workerPlugins()) args.insert(args.end(), {"--plugin", p});
  return args;
}

Worker& worker() {
  static Worker w(pluginWorkerArgs);
  return w;
}

/// A call's spec: {key: value as a case string writes it} of its non-default fields.
json specJson(const RowShape& s) {
  json j = json::object();
  for (const auto& [key, code] : s.spec.values()) j[key] = findSpecField(key)->print(code, s.dtype);
  return j;
}

/// A call's request: its tensors as (region, offset) and the regions they lie in.
class Request {
 public:
  Request(const char* entry, const std::string& variant, const RowShape& s, const LaunchEnv& e) {
    j_ = {{"entry", entry},
          {"variant", variant},
          {"shape", {int(s.dtype), s.M, s.N, s.ld, s.eps}},
          // The spec beside the shape: its fields that are not at their default,
          // as a case string writes them (wdtype=fp32; a Python worker reads
          // the weights' and the statistics' dtypes from it).
          {"spec", specJson(s)},
          {"env", {e.sm_count, e.ctas_override, e.perturb_schedule}}};
  }
  /// A multi-rank op's call: which rank of how many, the call's generation,
  /// and the device the rank runs on (-1: the host).
  Request& rank(const LaunchEnv& e, int device) {
    j_["rank"] = {e.rank, e.ranks, e.generation, device};
    return *this;
  }
  Request& ptr(const char* name, const void* p) {
    if (!p) {  // a tensor the spec lacks (LayerNorm's beta under affine=nobias): null in the worker too
      j_["ptrs"][name] = nullptr;
      return *this;
    }
    const auto found = findRegion(p);
    if (!found) throw std::logic_error(fmt::format("tensor '{}' is not in a shared region", name));
    const auto& [region, offset] = *found;
    j_["ptrs"][name] = {region.id, offset};
    const std::string key = std::to_string(region.id);
    if (!j_["regions"].contains(key)) {
      if (region.where == Backend::Host) {
        j_["regions"][key] = {{"where", "host"}, {"pid", int(getpid())}, {"fd", region.fd}, {"bytes", region.bytes}};
      } else {
        cudaops::DeviceScope on(region.device);
        j_["regions"][key] = {{"where", "cuda"},
                              {"ipc", cudaops::ipcHandle(region.base)},
                              {"device", region.device},
                              {"bytes", region.bytes}};
      }
    }
    return *this;
  }
  const json& get() const { return j_; }

 private:
  json j_;
};

std::string what(const std::string& variant, const char* entry) { return fmt::format("{} {}", variant, entry); }

// ---------------------------------------------------------------------------
// The worker's side.

/// The regions of one request, mapped into this process for the call.
class Mapped {
 public:
  /// `on_device`: a rank's own GPU, into whose address space every GPU
  /// region is mapped (a peer's buffer too: opened there, CUDA enables peer
  /// access to it); -1: each on its own device.
  Mapped(const json& regions, int on_device) {
    for (const auto& [key, r] : regions.items()) {
      Region m{r.at("where") == "cuda", nullptr, r.at("bytes").get<size_t>()};
      if (m.cuda) {
        cudaops::DeviceScope on(on_device >= 0 ? on_device : r.at("device").get<int>());
        m.base = cudaops::openIpcHandle(r.at("ipc").get<std::string>());
      } else {
        m.base = mapForeignHost(r.at("pid").get<int>(), r.at("fd").get<int>(), m.bytes);
      }
      by_id_[std::stoull(key)] = m;
    }
  }
  ~Mapped() {
    for (auto& [id, m] : by_id_) {
      if (m.cuda) cudaops::closeIpcHandle(m.base);
      else unmapForeignHost(m.base, m.bytes);
    }
  }
  void* at(const json& ptrs, const char* name) const {
    const json& p = ptrs.at(name);
    if (p.is_null()) return nullptr;
    const Region& m = by_id_.at(p.at(0).get<uint64_t>());
    return static_cast<char*>(m.base) + p.at(1).get<size_t>();
  }

 private:
  struct Region {
    bool cuda;
    void* base;
    size_t bytes;
  };
  std::map<uint64_t, Region> by_id_;
};

/// Runs one request's kernel call and waits for it; returns an unchecked
/// launch failure it left (synchronizeVariant), empty if none.
std::string execute(const json& req) {
  const std::string entry = req.at("entry"), name = req.at("variant");
  const json& sh = req.at("shape");
  RowShape s{DType(sh.at(0).get<int>()), sh.at(1).get<int64_t>(), sh.at(2).get<int64_t>(), sh.at(3).get<int64_t>(),
             sh.at(4).get<float>()};
  if (const auto spec = req.find("spec"); spec != req.end())
    for (const auto& [key, text] : spec->items()) {
      const SpecField* f = findSpecField(key);
      if (!f) throw std::invalid_argument(fmt::format("unknown spec field '{}' in a call", key));
      s.spec.setCode(key, f->parse(text.get<std::string>(), s.dtype));
    }
  const json& ev = req.at("env");
  LaunchEnv env{ev.at(0).get<int>(), ev.at(1).get<int>(), nullptr, ev.at(2).get<bool>()};
  int device = -1;  // a rank's own GPU
  if (const auto rank = req.find("rank"); rank != req.end()) {
    env.rank = rank->at(0).get<int>();
    env.ranks = rank->at(1).get<int>();
    env.generation = rank->at(2).get<uint64_t>();
    device = rank->at(3).get<int>();
  }
  const json& ptrs = req.at("ptrs");
  const auto [door, entry_point] = entryPoint(entry);
  if (!door) throw std::invalid_argument(fmt::format("unknown entry point '{}'", entry));
  const KernelInfo* info = door->find(name);
  if (!info) throw std::invalid_argument(fmt::format("this worker has no {} variant '{}'", door->op, name));
  const Mapped m(req.at("regions"), device);
  const TensorAt at = [&](const char* tensor) { return m.at(ptrs, tensor); };
  cudaops::DeviceScope on(device);  // no-op for -1
  {
    // Beside a schedule-perturbing load when the coordinator asked for one.
    ScheduleNoise noise(env.perturb_schedule, info->backend, env.sm_count);
    entry_point->run(name, s, at, env);
  }
  return info->backend == Backend::Cuda ? synchronizeVariant(entry.c_str()) : std::string();
}

}  // namespace

void setWorkerPlugins(std::vector<std::string> paths) { workerPlugins() = std::move(paths); }

void probePlugin(const std::string& path) {
  const ChildResult r = runChild({"/proc/self/exe", "worker", "--probe", "--plugin", path}, kStartSeconds);
  if (r.timed_out)
    throw PluginError(fmt::format("{}: loading it did not finish within {} s (a library constructor that hangs?); "
                                  "ulpcheck did not load it",
                                  path, kStartSeconds));
  if (WIFSIGNALED(r.status))
    throw PluginError(fmt::format("{}: loading it {} in the process that tried (its library constructor or {}() "
                                  "crashed); ulpcheck did not load it",
                                  path, describeExit(r.status), "ulpcheck_plugin_v1"));
  // The probe says kProbeLoaded once the plugin loaded; status 2 is a
  // plugin it refused (loadPlugin says why). Anything else ended it while
  // loading: a constructor that calls exit() would end ulpcheck, even with 0.
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && r.out == kProbeLoaded) return;
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2) return;
  throw PluginError(fmt::format("{}: loading it ended the process that tried ({}; its library constructor or {}() "
                                "called exit?); ulpcheck did not load it",
                                path, describeExit(r.status), "ulpcheck_plugin_v1"));
}

namespace {

/// Calls into `w` for variant `name` (its first call of each shape given
/// kCompileSeconds where it compiles per shape).
RemoteEntry callsInto(Worker& w, const std::string& name, bool compiles_per_shape) {
  return [&w, name, compiles_per_shape](const char* entry, const RowShape& s, const LaunchEnv& e,
                                        const NamedTensors& tensors) {
    Request r(entry, name, s, e);
    for (const auto& [tensor, p] : tensors) r.ptr(tensor, p);
    w.call(r.get(), what(name, entry), e.call_timeout_s > 0 ? e.call_timeout_s : kDefaultCallTimeoutSeconds,
           compiles_per_shape);
  };
}

// ---------------------------------------------------------------------------
// Multi-rank calls: one worker process per rank

/// The R worker processes of multi-rank calls, rank r's argv made by
/// `command(fd, r, R, rendezvous)`: started together (they may meet each
/// other before saying ready: torch.distributed's init), called together,
/// and after any failure stopped together, since a rank left waiting for a
/// dead peer would hang and the next start needs a fresh rendezvous.
class RankGroup {
 public:
  using Command = std::function<std::vector<std::string>(int fd, int rank, int ranks, const std::string& rendezvous)>;

  RankGroup(int ranks, Command command) {
    for (int r = 0; r < ranks; ++r)
      workers_.push_back(
          std::make_unique<Worker>([this, r, ranks, command](int fd) { return command(fd, r, ranks, rendezvous_); }));
  }
  ~RankGroup() { stopAll(); }

  /// Sends requests[r] to rank r, all before any reply is read, and waits
  /// for every reply, watching every rank at once: a rank that fails or
  /// dies ends the call at once (its peers, waiting for it, are stopped),
  /// one that does not answer by the deadline is a hang.
  void call(const std::vector<json>& requests, const std::string& what, double timeout, bool compiles_per_shape) {
    constexpr int kDeathGraceMs = 250;
    const int R = int(workers_.size());
    auto rankWhat = [&](int r) { return fmt::format("{} (rank {} of {})", what, r, R); };
    std::optional<KernelFailure> failure;
    bool failed_rank_alive = false;  // the failure is an error a live worker reported, not its death
    // A rank that dies is the cause; its peers' errors (gloo's "connection
    // reset by peer") are the consequence and may arrive at the same time:
    // a death is reported before them.
    auto noteFailure = [&](int r, const KernelFailure& f) {
      const bool alive = workers_[size_t(r)]->running();
      if (failure && !(failed_rank_alive && !alive)) return;
      failure = KernelFailure(fmt::format("rank {} of {}: {}", r, R, f.what()), f.hang);
      failed_rank_alive = alive;
    };
    std::vector<Worker::Pending> pending(size_t(R), Worker::Pending{});
    try {
      startAll(what);
      for (int r = 0; r < R; ++r)
        pending[size_t(r)] = workers_[size_t(r)]->send(requests[size_t(r)], rankWhat(r), timeout, compiles_per_shape);
    } catch (const KernelFailure& f) {
      failure = f;
    }
    std::vector<bool> done(size_t(R), false);
    std::string cold_why;
    for (int left = R; left > 0 && !failure;) {
      std::vector<pollfd> fds;
      std::vector<int> who;
      Clock::time_point deadline = Clock::time_point::max();
      for (int r = 0; r < R; ++r)
        if (!done[size_t(r)]) {
          fds.push_back(pollfd{workers_[size_t(r)]->fd(), POLLIN, 0});
          who.push_back(r);
          deadline = std::min(deadline, pending[size_t(r)].deadline);
        }
      const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      const int ready = left_ms > 0 ? poll(fds.data(), fds.size(), int(std::min<long long>(left_ms, 1 << 30))) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) {
        failure = KernelFailure(fmt::format("{}: waiting for the ranks failed: {}", what, std::strerror(errno)));
        break;
      }
      if (ready == 0) {  // out of time: every rank still out is hung (most wait for one that is)
        std::string out;
        for (int r : who) out += fmt::format("{}{}", out.empty() ? "" : ", ", r);
        failure = KernelFailure(fmt::format("{} did not return within {:g} s (a hang?) on rank{} {} of {}", what,
                                            pending[size_t(who[0])].timeout, who.size() > 1 ? "s" : "", out, R),
                                /*hung=*/true);
        break;
      }
      for (size_t i = 0; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        const int r = who[i];
        try {
          workers_[size_t(r)]->receive(pending[size_t(r)]);
          done[size_t(r)] = true, --left;
          if (cold_why.empty()) cold_why = pending[size_t(r)].cold_why;
        } catch (const KernelFailure& f) {
          done[size_t(r)] = true;
          noteFailure(r, f);
        }
      }
    }
    if (failure && failed_rank_alive && !failure->hang) {
      // A reported error: the death behind it, if any, follows within moments.
      std::vector<pollfd> fds;
      std::vector<int> who;
      for (int r = 0; r < R; ++r)
        if (!done[size_t(r)] && workers_[size_t(r)]->running()) {
          fds.push_back(pollfd{workers_[size_t(r)]->fd(), POLLIN, 0});
          who.push_back(r);
        }
      if (!fds.empty() && poll(fds.data(), fds.size(), kDeathGraceMs) > 0)
        for (size_t i = 0; i < fds.size(); ++i)
          if (fds[i].revents) try {
              workers_[size_t(who[i])]->receive(pending[size_t(who[i])]);
            } catch (const KernelFailure& f) {
              noteFailure(who[i], f);
            }
    }
    if (failure) {
      stopAll();
      throw KernelFailure(fmt::format("{} (every rank's worker is restarted)", failure->what()), failure->hang);
    }
    if (!cold_why.empty()) countColdCall(std::move(cold_why));
  }

  /// Ends every rank's worker; the next call starts the group again.
  void stop() { stopAll(); }

 private:
  void startAll(const std::string& what) {
    if (std::all_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->running(); })) return;
    stopAll();
    static std::atomic<int> groups{0};
    rendezvous_path_ =
        (std::filesystem::temp_directory_path() / fmt::format("ulpcheck-rendezvous-{}-{}", getpid(), ++groups))
            .string();
    std::filesystem::remove(rendezvous_path_);
    rendezvous_ = "file://" + rendezvous_path_;
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(kStartSeconds);
    try {
      for (auto& w : workers_) w->spawn();
      for (size_t r = 0; r < workers_.size(); ++r)
        workers_[r]->awaitReady(fmt::format("{} (rank {} of {})", what, r, workers_.size()), deadline);
    } catch (...) {
      stopAll();
      throw;
    }
  }

  void stopAll() {
    for (auto& w : workers_) w->stop();
    if (!rendezvous_path_.empty()) {
      std::error_code ec;
      std::filesystem::remove(rendezvous_path_, ec);
    }
  }

  std::vector<std::unique_ptr<Worker>> workers_;
  std::string rendezvous_path_, rendezvous_;  // torch.distributed's init_method: a file only this group uses
};

/// Calls of a multi-rank variant into the rank group of its rank count
/// (one group per count, shared by the variants `command` serves: a
/// plugin's, or Python's of one backend), rank r on GPU r where `cuda`.
RankedRemoteEntry rankedCallsInto(std::map<int, std::unique_ptr<RankGroup>>& groups, RankGroup::Command command,
                                  const std::string& name, bool cuda, bool compiles_per_shape) {
  return [&groups, command, name, cuda, compiles_per_shape](const char* entry, const RowShape& s, const LaunchEnv& e,
                                                            const std::vector<NamedTensors>& per_rank) {
    const int R = int(per_rank.size());
    std::unique_ptr<RankGroup>& group = groups[R];
    if (!group) group = std::make_unique<RankGroup>(R, command);
    std::vector<json> requests;
    for (int r = 0; r < R; ++r) {
      LaunchEnv mine = e;
      mine.rank = r, mine.ranks = R;
      Request q(entry, name, s, mine);
      q.rank(mine, cuda ? r : -1);
      for (const auto& [tensor, p] : per_rank[size_t(r)]) q.ptr(tensor, p);
      requests.push_back(q.get());
    }
    group->call(requests, what(name, entry), e.call_timeout_s > 0 ? e.call_timeout_s : kDefaultCallTimeoutSeconds,
                compiles_per_shape);
  };
}

/// The rank groups of the C++ plugins' multi-rank variants: `ulpcheck
/// worker`, rank r told by each call (they meet through the communication
/// buffers ulpcheck hands them, not a rendezvous).
std::map<int, std::unique_ptr<RankGroup>>& pluginRankGroups() {
  static std::map<int, std::unique_ptr<RankGroup>> groups;
  return groups;
}

RankGroup::Command pluginRankCommand() {
  return [](int fd, int, int, const std::string&) { return pluginWorkerArgs(fd); };
}

// ---------------------------------------------------------------------------
// Python kernels

std::vector<std::string>& pythonFiles() {
  static std::vector<std::string> files;
  return files;
}

/// The folder holding the `ulpcheck` Python package: installed beside the
/// executable (<prefix>/share/ulpcheck/python), else the source tree's.
std::string pythonPackageDir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share" / "ulpcheck" / "python";
    if (std::filesystem::is_directory(installed / "ulpcheck", ec)) return installed.string();
  }
  return ULPCHECK_PYTHON_DIR;
}

std::string pythonInterpreter() {
  const char* env = std::getenv("ULPCHECK_PYTHON");
  return env && *env ? env : "python3";
}

/// Puts the package on the worker's PYTHONPATH (inherited by the children).
void exportPythonPath() {
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = pythonPackageDir() + (old && *old ? ":" + std::string(old) : "");
  setenv("PYTHONPATH", path.c_str(), 1);
}

std::vector<std::string> pythonWorkerArgs(const std::vector<std::string>& head) {
  std::vector<std::string> args{pythonInterpreter(), "-m", "ulpcheck.worker"};
  args.insert(args.end(), head.begin(), head.end());
  for (const auto& f : pythonFiles()) args.insert(args.end(), {"--python", f});
  return args;
}

Worker& pythonWorker() {
  static Worker w([](int fd) { return pythonWorkerArgs({"--fd", std::to_string(fd)}); });
  return w;
}

/// The rank groups of Python's multi-rank variants of one backend: each
/// rank's worker joins a torch.distributed process group (NCCL on the GPU,
/// rank r on GPU r; gloo on the host) before it says ready.
std::map<int, std::unique_ptr<RankGroup>>& pythonRankGroups(bool cuda) {
  static std::map<int, std::unique_ptr<RankGroup>> groups[2];
  return groups[cuda];
}

RankGroup::Command pythonRankCommand(bool cuda) {
  return [cuda](int fd, int rank, int ranks, const std::string& rendezvous) {
    return pythonWorkerArgs({"--fd", std::to_string(fd), "--rank", std::to_string(rank), "--ranks",
                             std::to_string(ranks), "--rendezvous", rendezvous, "--dist-backend",
                             cuda ? "nccl" : "gloo"});
  };
}

DType dtypeNamed(const std::string& n) {
  const auto t = parseDType(n);
  if (!t) throw PluginError(fmt::format("unknown dtype '{}'", n));
  return *t;
}

/// A Python variant's row_depth or col_depth: a fixed depth, or [lanes, levels]
/// (the package checked them; a described variant is trusted no further).
DeclaredDepth declaredDepth(const json& v, const char* key) {
  const json& d = v.at(key);
  DeclaredDepth declared;
  if (d.is_array() && d.size() == 2 && d[0].is_number_integer() && d[1].is_number_integer() &&
      d[0].get<int64_t>() >= 1 && d[1].get<int64_t>() >= 0) {
    declared.lanes = d[0].get<int64_t>();
    declared.levels = d[1].get<int64_t>();
  } else if (d.is_number_integer() && d.get<int64_t>() >= 0) {
    declared.fixed = d.get<int64_t>();
  } else {
    throw PluginError(fmt::format("{} must be a depth >= 0 or [lanes >= 1, levels >= 0], not {}", key, d.dump()));
  }
  return declared;
}

/// A Python LayerNorm's running_means: absent or null, or [lanes, vector,
/// levels], with the form of its merges, running_merges: absent or "" (either
/// form), "update" or "update_unless_vectorized" (the package checked them).
DeclaredRunningMeans declaredRunningMeans(const json& v) {
  const std::string merges = v.contains("running_merges") && v.at("running_merges").is_string()
                                 ? v.at("running_merges").get<std::string>()
                                 : "";
  using Merges = DeclaredRunningMeans::Merges;
  const std::optional<Merges> form = merges.empty()       ? std::optional{Merges::Either}
                                     : merges == "update" ? std::optional{Merges::Update}
                                     : merges == "update_unless_vectorized"
                                         ? std::optional{Merges::UpdateUnlessVectorized}
                                         : std::nullopt;
  if (!form)
    throw PluginError(
        fmt::format("running_merges must be \"update\" or \"update_unless_vectorized\", not \"{}\"", merges));
  if (!v.contains("running_means") || v.at("running_means").is_null()) {
    if (*form != Merges::Either)
      throw PluginError("running_merges says how running means merge: running_means is not declared");
    return {};
  }
  const json& d = v.at("running_means");
  const auto at_least = [&](size_t i, int64_t least) {
    return d[i].is_number_integer() && d[i].get<int64_t>() >= least;
  };
  if (!d.is_array() || d.size() != 3 || !at_least(0, 1) || !at_least(1, 1) || !at_least(2, 0))
    throw PluginError(fmt::format("running_means must be [lanes >= 1, vector >= 1, levels >= 0], not {}", d.dump()));
  return {d[0].get<int64_t>(), d[1].get<int64_t>(), d[2].get<int64_t>(), *form};
}

}  // namespace

void runInWorker(const std::string& op, const std::string& name) {
  const OpDoor* door = findDoor(op);
  if (!door)
    throw std::invalid_argument(fmt::format("op '{}' cannot run in a worker (only {} can)", op, opsWithDoors()));
  const KernelInfo* info = door->find(name);
  if (!info) throw std::invalid_argument(fmt::format("no {} variant '{}' to run in a worker", op, name));
  if (door->multi_rank)
    door->forward_ranks_into(name, rankedCallsInto(pluginRankGroups(), pluginRankCommand(), name,
                                                   info->backend == Backend::Cuda, info->compiles_per_shape));
  else door->forward_into(name, callsInto(worker(), name, info->compiles_per_shape));
}

void restartWorkers() {
  worker().stop();
  pythonWorker().stop();
  for (auto* groups : {&pluginRankGroups(), &pythonRankGroups(false), &pythonRankGroups(true)})
    for (auto& [ranks, group] : *groups) group->stop();
}

bool canRunInWorker(const std::string& op) {
  // A multi-rank op's built-in variants drive every rank from one process.
  const OpDoor* door = findDoor(op);
  return door && !door->multi_rank;
}

namespace {

// This run's description of its Python files, handed to its own worker
// processes (--gpus, --workers inherit the environment) so that each does not
// start Python again to describe the same files: a describe is an interpreter
// start and the files' imports (torch: 0.9 s on the CI machine, 4.4 s on the
// H200 machine), on every run's critical path once per process level. The
// key (interpreter, files with their sizes and modification times) makes a
// description of other files, or of an edited one, never used.
constexpr const char* kDescribedEnv = "ULPCHECK_PYTHON_DESCRIBED";
constexpr size_t kDescribedEnvMax = 64 * 1024;  // well under one variable's limit (MAX_ARG_STRLEN, 128 KiB)

json describedKey() {
  json files = json::array();
  for (const auto& f : pythonFiles()) {
    std::error_code size_error, time_error;
    const auto size = std::filesystem::file_size(f, size_error);
    const auto modified = std::filesystem::last_write_time(f, time_error).time_since_epoch().count();
    files.push_back({f, size_error ? -1 : int64_t(size), time_error ? 0 : int64_t(modified)});
  }
  return {{"python", pythonInterpreter()}, {"files", files}};
}

/// What the files register: as the coordinator of this run described it, or
/// from `python -m ulpcheck.worker --describe` (stderr, a traceback included,
/// passes through; a failure the worker understands comes as {"error": ...}).
json describePythonVariants() {
  const json key = describedKey();
  if (const char* handed = std::getenv(kDescribedEnv)) {
    const json j = json::parse(handed, nullptr, false);
    if (j.is_object() && j.value("key", json()) == key && j.value("variants", json()).is_array())
      return j.at("variants");
  }
  const ChildResult r = runChild(pythonWorkerArgs({"--describe"}), kStartSeconds);
  const json described = json::parse(r.out, nullptr, false);
  if (described.is_object() && described.contains("error")) throw PluginError(described.at("error").get<std::string>());
  if (r.timed_out)
    throw PluginError(
        fmt::format("{} -m ulpcheck.worker --describe did not finish within {} s", pythonInterpreter(), kStartSeconds));
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127 && r.out.empty())
    throw PluginError(fmt::format("cannot start the Python interpreter '{}' (set ULPCHECK_PYTHON to a Python with "
                                  "torch)",
                                  pythonInterpreter()));
  if (r.status != 0)
    throw PluginError(fmt::format("{} -m ulpcheck.worker --describe {} (its messages are above; ULPCHECK_PYTHON sets "
                                  "the interpreter)",
                                  pythonInterpreter(), describeExit(r.status)));
  if (!described.is_array()) throw PluginError(fmt::format("the Python worker described its variants as '{}'", r.out));
  // Registration runs before any case, no other thread reading the environment.
  const std::string handed = json{{"key", key}, {"variants", described}}.dump();
  if (handed.size() <= kDescribedEnvMax) setenv(kDescribedEnv, handed.c_str(), 1);
  return described;
}

}  // namespace

std::vector<std::string> registerPythonVariants(const std::vector<std::string>& files) {
  std::vector<std::string> names;
  if (files.empty()) return names;
  for (const auto& f : files) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(f, ec)) throw PluginError(fmt::format("{}: no such file", f));
    pythonFiles().push_back(std::filesystem::absolute(f).lexically_normal().string());
  }
  exportPythonPath();
  const json described = describePythonVariants();
  for (const json& v : described) {
    try {
      KernelInfo info;
      info.op = v.at("op");
      info.name = v.at("name");
      info.description = v.value("description", "");
      info.backend = v.at("backend") == "cuda" ? Backend::Cuda : Backend::Host;
      for (const auto& t : v.at("dtypes")) info.dtypes.push_back(dtypeNamed(t));
      info.contracts.deterministic = v.at("deterministic");
      info.contracts.batch_invariant = v.at("batch_invariant");
      info.contracts.accumulation = dtypeNamed(v.at("accumulation"));
      info.contracts.unfused_pipeline = v.value("unfused_pipeline", std::string());
      info.contracts.bitwise_with_unfused = v.value("bitwise_with_unfused", std::vector<std::string>{});
      info.preconditions = {v.at("contiguous_rows"), v.at("aligned_rows"), v.at("max_cols").get<int64_t>(),
                            v.value("cols", std::vector<int64_t>{}), v.value("min_rows", int64_t{0})};
      info.origin = v.at("origin");
      info.black_box = true;
      info.compiles_per_shape = v.value("compiles_per_shape", false);
      try {
        info.specs = declaredSpecSupport(info.op, v.value("spec", json::object()));
      } catch (const std::invalid_argument& e) {
        throw PluginError(e.what());
      }
      info.python_file = pythonFiles().front();
      for (const auto& f : pythonFiles())
        if (info.origin.find(f) != std::string::npos) info.python_file = f;
      const OpDoor* door = findDoor(info.op);
      if (!door) throw PluginError(fmt::format("op '{}' is not one of {}", info.op, opsWithDoors()));
      if (!v.at("saves_stats").get<bool>()) info.unprovided_outputs = door->statistics;
      if (!v.value("has_backward", true) && door->has_backward) {
        if (door->backward_outputs.empty())
          throw PluginError(fmt::format("{} needs a backward (backward=None)", info.op));
        info.unprovided_outputs.insert(info.unprovided_outputs.end(), door->backward_outputs.begin(),
                                       door->backward_outputs.end());
      }
      for (const KernelInfo& k : kernelCatalog())
        if (k.name == info.name) throw PluginError(fmt::format("the name is taken ({})", k.origin));
      const DeclaredDepth row_depth = declaredDepth(v, "row_depth"), col_depth = declaredDepth(v, "col_depth");
      ReductionDepths declared;
      declared.two_pass_statistics = v.value("two_pass_statistics", false);
      declared.mean_of_plain_sum = v.value("mean_of_plain_sum", false);
      declared.uses_saved_statistics = v.value("uses_saved_statistics", false);
      const DeclaredRunningMeans running = declaredRunningMeans(v);
      auto depths = [row_depth, col_depth, declared, running](const RowShape& s, const LaunchEnv&) {
        return blackBoxDepths(row_depth, col_depth, s, declared, running);
      };
      const std::string name = info.name;
      const bool jit = info.compiles_per_shape;
      if (door->multi_rank) {
        const bool cuda = info.backend == Backend::Cuda;
        info.one_rank_per_gpu = cuda;
        info.rank_choices = v.value("ranks", std::vector<int>{});
        door->add_remote_ranks(
            std::move(info), rankedCallsInto(pythonRankGroups(cuda), pythonRankCommand(cuda), name, cuda, jit), depths);
      } else {
        door->add_remote(std::move(info), callsInto(pythonWorker(), name, jit), depths);
      }
      names.push_back(name);
    } catch (const json::exception& e) {
      throw PluginError(fmt::format("a Python variant's description {}: {}", v.dump(), e.what()));
    } catch (const PluginError& e) {
      throw PluginError(fmt::format("Python variant '{}': {}", v.value("name", "?"), e.what()));
    }
  }
  return names;
}

const ColdCalls& coldCallsOnThisThread() { return t_cold_calls; }

int serve(int fd) {
  if (!sendMessage(fd, json{{"ready", true}})) return 1;
  for (json req; receiveMessage(fd, req, nullptr) == 1;) {
    json reply{{"ok", true}};
    bool fatal = false;
    try {
      if (const std::string unchecked = execute(req); !unchecked.empty()) reply["unchecked_launch"] = unchecked;
    } catch (const CudaError& e) {
      fatal = e.sticky;
      reply = {{"ok", false}, {"fatal", fatal}, {"error", fmt::format("CUDA error in the kernel: {}", e.what())}};
    } catch (const std::exception& e) {
      reply = {{"ok", false}, {"fatal", false}, {"error", e.what()}};
    }
    if (!sendMessage(fd, reply) || fatal) return fatal ? 3 : 1;
  }
  return 0;
}

}  // namespace ulpcheck::remote
