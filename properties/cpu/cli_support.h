// Runs the ulpcheck executable as a user would, for the CLI suites.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace ulpcheck::testing {

struct Result {
  int code;            // exit status (-1: killed by a signal)
  std::string output;  // stdout and stderr together
};

inline Result cli(const std::string& args) {
  const std::string cmd = std::string(ULPCHECK_CLI) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace ulpcheck::testing
