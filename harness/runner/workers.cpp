#include "harness/runner/workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "harness/runner/exit_codes.h"

extern char** environ;

namespace ulpcheck::workers {

void say(const char* tag, const nlohmann::json& payload) {
  static std::mutex mutex;
  const std::string line = tag + payload.dump() + "\n";
  std::lock_guard<std::mutex> lock(mutex);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

namespace {

constexpr const char* kCoordinatorPid = "ULPCHECK_COORDINATOR_PID";

struct Running {
  pid_t pid = -1;
  int fd = -1;  // the read end of its stdout
  std::string pending;
  bool open = true;
};

pid_t spawn(const WorkerSpec& spec, int* read_fd) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  // The environment: ours, with the worker's own settings in place of ours.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env[std::string(*e, size_t(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  env[kCoordinatorPid] = std::to_string(getpid());  // dieWithCoordinator
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw std::runtime_error(fmt::format("cannot start worker {} ({}): {}", spec.name, argv[0], std::strerror(rc)));
  }
  *read_fd = fds[0];
  return pid;
}

void dispatch(int worker, const std::string& line, const Handlers& h) {
  for (const char* tag : {kProgress, kLog, kJson, kResult, kStats}) {
    const size_t n = std::strlen(tag);
    if (line.compare(0, n, tag) != 0) continue;
    nlohmann::json payload;
    try {
      payload = nlohmann::json::parse(line.substr(n));
    } catch (const nlohmann::json::exception&) {
      break;  // not ours after all: pass it on as text
    }
    if (h.message) h.message(worker, std::string(tag, n - 1), payload);
    return;
  }
  if (h.other) h.other(worker, line);
}

}  // namespace

std::vector<int> runWorkers(const std::vector<WorkerSpec>& specs, const Handlers& handlers, std::vector<int>* signals) {
  std::vector<Running> running(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    try {
      running[i].pid = spawn(specs[i], &running[i].fd);
    } catch (...) {
      for (size_t j = 0; j < i; ++j) kill(running[j].pid, SIGTERM), waitpid(running[j].pid, nullptr, 0);
      throw;
    }
  }
  for (size_t open = specs.size(); open > 0;) {
    std::vector<pollfd> fds;
    std::vector<size_t> who;
    for (size_t i = 0; i < running.size(); ++i)
      if (running[i].open) fds.push_back({running[i].fd, POLLIN, 0}), who.push_back(i);
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));
    }
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Running& r = running[who[k]];
      char buf[65536];
      const ssize_t n = read(r.fd, buf, sizeof buf);
      if (n > 0) {
        r.pending.append(buf, size_t(n));
        for (size_t eol; (eol = r.pending.find('\n')) != std::string::npos;) {
          dispatch(int(who[k]), r.pending.substr(0, eol), handlers);
          r.pending.erase(0, eol + 1);
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (!r.pending.empty()) dispatch(int(who[k]), r.pending, handlers);  // a last line without its newline
      close(r.fd);
      r.open = false;
      --open;
    }
  }
  std::vector<int> codes;
  if (signals) signals->assign(running.size(), 0);
  for (size_t i = 0; i < running.size(); ++i) {
    int status = 0;
    while (waitpid(running[i].pid, &status, 0) < 0 && errno == EINTR) {
    }
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (signals && WIFSIGNALED(status)) (*signals)[i] = WTERMSIG(status);
  }
  return codes;
}

void dieWithCoordinator() {
  const char* coordinator = std::getenv(kCoordinatorPid);
  if (!coordinator) return;
  const pid_t parent = pid_t(std::atol(coordinator));
  unsetenv(kCoordinatorPid);  // not for this worker's own children
  // The coordinator's main thread started us (runWorkers), so the signal
  // comes when the coordinator itself ends.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(exit_code::kRuntimeError);  // it ended before we asked
}

std::vector<std::string> withoutOptions(const std::vector<std::string>& args, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    bool drop = false;
    for (const auto& name : names) {
      if (args[i] == name) {
        drop = true;
        ++i;  // and its value
        break;
      }
      if (args[i].rfind(name + "=", 0) == 0) {
        drop = true;
        break;
      }
    }
    if (!drop) out.push_back(args[i]);
  }
  return out;
}

std::vector<std::string> visibleGpus(int count) {
  std::vector<std::string> out;
  if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES"); env && *env) {
    std::string s = env;
    for (size_t start = 0; start <= s.size();) {
      const size_t comma = s.find(',', start);
      const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!item.empty()) out.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (int(out.size()) > count) out.resize(size_t(count));
    return out;
  }
  for (int i = 0; i < count; ++i) out.push_back(std::to_string(i));
  return out;
}

}  // namespace ulpcheck::workers
