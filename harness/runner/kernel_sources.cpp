#include "harness/runner/kernel_sources.h"

#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/runner/exit_codes.h"
#include "kernels/plugin/plugin_loader.h"
#include "kernels/plugin/remote.h"
#include "kernels/registry.h"

namespace ulpcheck {

void loadKernelSources(const KernelSources& sources, bool probed) {
  std::vector<std::string> loaded;
  for (const auto& path : sources.plugin_paths) {
    if (!probed) remote::probePlugin(path);
    const LoadedPlugin& p = loadPlugin(path);
    fmt::print("# plugin {}: {} ({} variants: {}), sha256 {}{}\n", p.path, p.name, p.variants.size(),
               fmt::join(p.variants, ", "), p.sha256, sources.in_process ? "; run in this process" : "");
    loaded.push_back(p.path);
    if (!sources.in_process)
      for (const KernelInfo& k : kernelCatalog())
        if (k.plugin_path == p.path) remote::runInWorker(k.op, k.name);
  }
  remote::setWorkerPlugins(loaded);
  if (!sources.python_files.empty()) {
    const auto names = remote::registerPythonVariants(sources.python_files);
    fmt::print("# python {}: {} variants ({}), in a Python worker\n", fmt::join(sources.python_files, ", "),
               names.size(), fmt::join(names, ", "));
  }
}

int serveKernelCalls(int fd, bool probe, const std::vector<std::string>& plugins) {
  if (probe) {
    try {
      for (const auto& path : plugins) loadPlugin(path);
    } catch (const PluginError&) {
      return exit_code::kUsage;
    }
    std::fputs(remote::kProbeLoaded, stdout);
    return exit_code::kOk;
  }
  if (fd < 0) throw UsageError("worker: --fd is required");
  for (const auto& path : plugins) loadPlugin(path);
  return remote::serve(fd);
}

}  // namespace ulpcheck
