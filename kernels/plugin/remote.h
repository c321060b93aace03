// Kernels from outside ulpcheck run in a worker process (`ulpcheck worker`),
// so a segfault, an abort, a sticky CUDA error or a hang in one is a failing
// case with its repro, not the end of the run: the coordinator restarts the
// worker on the next call and the campaign goes on.
//
// The coordinator keeps everything but the kernel call: inputs, poison,
// canaries, oracle, judgment. Every Buffer is a shared region
// (core/shared_memory.h), so a call names its tensors as (region,
// offset) and the worker maps the same bytes: a memfd on the host, a CUDA
// IPC handle on the GPU. Protocol: over a Unix socket pair, each message a
// 4-byte little-endian length and a JSON object; a request names the
// variant, the entry point, the shape, the launch environment and its
// tensors; the reply is {"ok": true} or {"ok": false, "error": ..., "fatal": ...}
// (fatal: the worker's CUDA context is lost and it exits).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ulpcheck::remote {

/// The plugins a worker loads when it starts (the coordinator's --plugin list).
void setWorkerPlugins(std::vector<std::string> paths);

/// Loads a plugin in a child process first (`ulpcheck worker --probe`):
/// loading runs the library's constructors and its ulpcheck_plugin_v1(), and
/// one that crashes, hangs or exits must end the child, not ulpcheck. Throws
/// PluginError saying so; a plugin the child refuses for another reason (a
/// malformed table, exit status 2) is left for loadPlugin to refuse, precisely.
void probePlugin(const std::string& path);

/// The version of what the Python package (python/ulpcheck) and this CLI
/// say to each other: the worker protocol, the run options and JSON lines
/// the pytest plugin reads. `ulpcheck version` prints it; the package's
/// PROTOCOL must equal it (the plugin refuses a CLI that differs). Raise
/// both together.
inline constexpr int kPythonProtocol = 1;

/// What `ulpcheck worker --probe` prints on its stdout once its plugins loaded.
inline constexpr const char* kProbeLoaded = "loaded\n";

/// The first call of each shape of a variant that compiles per shape
/// (KernelInfo::compiles_per_shape: quack's CuTe DSL kernels, JIT-compiled
/// in seconds to a minute) may take this long, whatever --case-timeout says:
/// compile time is not a hang. Later calls of that shape get the timeout.
inline constexpr double kCompileSeconds = 900;

/// Moves a registered variant's entry points into the worker: its forward
/// and backward become calls into it (KernelInfo::remote is set).
/// Throws std::invalid_argument for an op without doors (kernels/door.h).
void runInWorker(const std::string& op, const std::string& name);
/// Whether `op`'s variants can run in a worker: it has doors (kernels/door.h).
bool canRunInWorker(const std::string& op);

/// Ends every worker process (the plugins', Python's, Python's rank groups);
/// the next call into one starts it anew, cold. Call it where no call is in
/// flight: the kill matrix does between its rows.
void restartWorkers();

/// The worker's loop, serving calls on socket `fd` until the coordinator
/// closes it; the return value is the process's exit status.
int serve(int fd);

/// The calls this thread has made that ran cold: a variant entry point's
/// first in its worker process since that process started (a worker
/// restarted after a crash starts cold again); for a variant that compiles
/// per shape, the first of a shape; for one that runs as a captured CUDA
/// graph (Python's cuda_graphs=True), a graph's first replay, as the worker
/// says. A cold call meets lazy initialisation, JIT compiles, first
/// allocations, the first launch of a CUDA module, what a graph's capture
/// left behind; a kernel wrong only then (aiter #4888) differs from the
/// later calls of the same case, and properties comparing runs say so.
struct ColdCalls {
  uint64_t count = 0;
  std::string last_why;  // "first call after its worker started", ...
};
const ColdCalls& coldCallsOnThisThread();

/// Python kernels: asks the Python worker (python -m ulpcheck.worker, the
/// package in python/ or <prefix>/share/ulpcheck/python; the interpreter
/// $ULPCHECK_PYTHON, else python3) which variants `files` register, and
/// registers each as a remote variant of its op, running in that worker.
/// Returns their names; throws PluginError (kernels/plugin/plugin_loader.h).
std::vector<std::string> registerPythonVariants(const std::vector<std::string>& files);

}  // namespace ulpcheck::remote
