// The kernels from outside ulpcheck a command loads: plugins (shared
// libraries, include/ulpcheck/plugin.h) and Python files (python/ulpcheck).
// They add their variants to every subcommand; unless asked not to, their
// kernels run in a worker process (kernels/plugin/remote.h), so a crash or a
// hang in one is a failing case, not the end of the run.
#pragma once

#include <string>
#include <vector>

namespace ulpcheck {

struct KernelSources {
  std::vector<std::string> plugin_paths, python_files;
  bool in_process = false;  // run plugin kernels in this process, not in a worker
};

/// Loads `sources`, saying each. `probed`: each plugin was loaded in a child
/// already (a coordinated run's worker: its coordinator did), else it is,
/// so a library that crashes as it loads ends a child, not this process.
/// Throws PluginError for a plugin that does not load.
void loadKernelSources(const KernelSources& sources, bool probed);

/// `ulpcheck worker`: this process serves kernel calls on socket `fd` for
/// its coordinator, with `plugins` loaded; or with `probe` only loads them
/// and exits, saying remote::kProbeLoaded (the coordinator learns from the
/// exit status; its own load says what is wrong). Its exit code.
int serveKernelCalls(int fd, bool probe, const std::vector<std::string>& plugins);

}  // namespace ulpcheck
