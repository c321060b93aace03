"""The Python worker: serves ulpcheck's kernel calls for Python variants.

    python -m ulpcheck.worker --describe --python kernels.py     # the variants, as JSON, on stdout
    python -m ulpcheck.worker --fd N --python kernels.py          # serve calls on socket N

Same protocol as `ulpcheck worker` (kernels/plugin/remote.h): each message a
4-byte little-endian length and a JSON object. A request names the variant,
the entry point, the shape, the launch environment and its tensors as
(region, offset) in regions ulpcheck shares: a memfd on the host (mapped
through /proc/<pid>/fd), a CUDA IPC handle on the GPU. The worker wraps them
as torch tensors, calls the variant, copies its results into ulpcheck's
buffers (poisoned: whatever is not written shows) and answers
{"ok": true} or {"ok": false, "error": ..., "fatal": ...}.
"""

import argparse
import ctypes
import hashlib
import importlib
import importlib.util
import json
import mmap
import os
import random
import socket
import struct
import sys
import traceback

import ulpcheck
from ulpcheck import ops

DTYPE_CODES = {0: "fp32", 1: "fp16", 2: "bf16"}  # core/dtype.h's DType


_FP8_DTYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def _torch_dtype(name):
    import torch
    if name in _FP8_DTYPES:  # torch >= 2.1 has them
        if not hasattr(torch, _FP8_DTYPES[name]):
            raise ValueError(f"torch {torch.__version__} has no torch.{_FP8_DTYPES[name]}: an fp8 output needs torch 2.1 "
                             "or later")
        return getattr(torch, _FP8_DTYPES[name])
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def _element_bytes(name):
    return {"fp32": 4, "fp16": 2, "bf16": 2, "e4m3": 1, "e5m2": 1}[name]


def load_kernels(path):
    spec = importlib.util.spec_from_file_location("ulpcheck_user_kernels", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def provenance(path, variant):
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    versions = [f"python {sys.version.split()[0]}"]
    for lib in variant.libraries:
        try:
            versions.append(f"{lib} {importlib.import_module(lib).__dict__.get('__version__', '?')}")
        except Exception as e:  # noqa: BLE001 - a library that does not import is worth saying
            versions.append(f"{lib} (not importable: {type(e).__name__})")
    return f"python {os.path.abspath(path)} (sha256 {digest}; {', '.join(versions)})"


# ---------------------------------------------------------------------------
# Framing


def send(sock, obj):
    data = json.dumps(obj).encode()
    sock.sendall(struct.pack("<I", len(data)) + data)


def recv_exactly(sock, n):
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def receive(sock):
    head = recv_exactly(sock, 4)
    if head is None:
        return None
    body = recv_exactly(sock, struct.unpack("<I", head)[0])
    return None if body is None else json.loads(body)


# ---------------------------------------------------------------------------
# ulpcheck's buffers as torch tensors


class _CudaArray:
    """Exposes a device pointer through __cuda_array_interface__ (bytes)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}


class _CudaIpc:
    """cudaIpcOpenMemHandle / cudaIpcCloseMemHandle through the CUDA runtime torch loaded."""

    def __init__(self):
        import torch
        torch.cuda.init()
        self.rt = None
        for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
            try:
                self.rt = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if self.rt is None:
            import glob
            import nvidia.cuda_runtime  # the wheel torch depends on
            for lib in glob.glob(os.path.join(nvidia.cuda_runtime.__path__[0], "lib", "libcudart.so*")):
                self.rt = ctypes.CDLL(lib)
                break
        if self.rt is None:
            raise RuntimeError("no CUDA runtime library found for CUDA IPC")

    class Handle(ctypes.Structure):
        """cudaIpcMemHandle_t: a 64-byte struct, passed by value (a bare char array would pass a pointer)."""
        _fields_ = [("reserved", ctypes.c_char * 64)]

    def open(self, hex_handle, device):
        import torch
        torch.cuda.set_device(device)
        handle = self.Handle.from_buffer_copy(bytes.fromhex(hex_handle))
        ptr = ctypes.c_void_p()
        self.rt.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(ctypes.c_void_p), self.Handle, ctypes.c_uint]
        err = self.rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), handle, 1)  # cudaIpcMemLazyEnablePeerAccess
        if err != 0:
            raise RuntimeError(f"cudaIpcOpenMemHandle failed with error {err}")
        return ptr.value

    def close(self, ptr):
        self.rt.cudaIpcCloseMemHandle(ctypes.c_void_p(ptr))


_ipc = None


def _tensor_in(region_bytes, where, dtype, rows, cols, ld):
    """rows x cols elements of dtype at (region, offset) of byte tensors region_bytes, row stride ld."""
    region, offset = where
    size = _element_bytes(dtype)
    raw = region_bytes[region][offset : offset + ((rows - 1) * ld + cols) * size]
    flat = raw.view(_torch_dtype(dtype))
    return flat.as_strided((rows, cols), (ld, 1))


class Regions:
    """The regions of one request, mapped for the call as byte tensors."""

    def __init__(self, regions):
        import torch
        global _ipc
        self.maps, self.ipc_ptrs, self.bytes = [], [], {}
        for key, r in regions.items():
            if r["where"] == "host":
                fd = os.open(f"/proc/{r['pid']}/fd/{r['fd']}", os.O_RDWR)
                try:
                    mm = mmap.mmap(fd, r["bytes"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                finally:
                    os.close(fd)
                self.maps.append(mm)
                self.bytes[int(key)] = torch.frombuffer(mm, dtype=torch.uint8)
            else:
                if _ipc is None:
                    _ipc = _CudaIpc()
                ptr = _ipc.open(r["ipc"], r["device"])
                self.ipc_ptrs.append(ptr)
                self.bytes[int(key)] = torch.as_tensor(_CudaArray(ptr, r["bytes"]), device=f"cuda:{r['device']}")

    def tensor(self, where, dtype, rows, cols, ld):
        return _tensor_in(self.bytes, where, dtype, rows, cols, ld)

    def close(self):
        self.bytes.clear()
        for mm in self.maps:
            try:
                mm.close()
            except BufferError:  # a tensor still holds it: the garbage collector will
                pass
        for ptr in self.ipc_ptrs:
            _ipc.close(ptr)


def _perturb_schedule(device):
    """A load on another stream, so the kernel meets different busy SMs run to run."""
    import torch
    stream = torch.cuda.Stream(device=device)
    n = random.randint(1 << 20, 1 << 25)
    with torch.cuda.stream(stream):
        t = torch.empty(n, device=device)
        for _ in range(random.randint(1, 8)):
            t.mul_(1.0001)
    return stream


def _poison_allocator(device, nbytes):
    """Hands torch's caching allocator memory of all-ones bytes (NaN in every
    float format) before the call, so an output element the library
    allocates and never writes comes back as 0xff... instead of a plausible
    leftover. (The CPU allocator cannot be poisoned this way.)"""
    import torch
    torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(255)  # freed at once, kept in the cache


def _store(name, got, out):
    """Copies a variant's result into ulpcheck's buffer, refusing a mismatch."""
    if got is None:
        raise ValueError(f"returned no {name}")
    if tuple(got.shape) != tuple(out.shape) and got.numel() == out.numel():
        got = got.reshape(out.shape)
    if tuple(got.shape) != tuple(out.shape):
        raise ValueError(f"returned {name} of shape {tuple(got.shape)}, expected {tuple(out.shape)}")
    if got.dtype != out.dtype:
        raise ValueError(f"returned {name} as {got.dtype}, the spec's is {out.dtype}")
    out.copy_(got)


class Call:
    """One request's tensors, as torch tensors over ulpcheck's buffers, by the
    names its op gives them; what an op's entry point (ulpcheck/ops) reads and
    stores."""

    def __init__(self, req, regions):
        dtype_code, self.M, self.N, self.ld, self.eps = req["shape"]
        self.dt = DTYPE_CODES[dtype_code]
        # The spec's fields that are not at their default, as a case string writes them.
        spec = req.get("spec", {})
        # The weight dtype (w, gamma, beta and their gradients): x's unless the spec says (wdtype=fp32).
        self.wdt = spec.get("wdtype", self.dt)
        # The saved statistics' dtype: fp32, or x's (stats=T); ulpcheck keeps them in fp32 buffers either way.
        self.sdt = spec.get("stats", "fp32")
        # The residual's dtype (a norm that adds one): x's unless the spec says (res=fp32).
        self.rdt = spec.get("res", self.dt)
        # A quantized output's fp8 format (rmsnorm_quant's fp8=e5m2; e4m3 the default).
        self.qdt = spec.get("fp8", "e4m3")
        self.spec = spec
        self.ptrs = req["ptrs"]
        self.regions = regions
        self.rank = req.get("rank")  # a multi-rank op's call: [rank, ranks, generation, device]

    def ranks(self):
        """A multi-rank call's Ranks (ulpcheck/ops/allreduce_rmsnorm.py)."""
        import torch
        from ulpcheck.ops.allreduce_rmsnorm import Ranks
        if self.rank is None:
            raise ValueError("this call names no rank")
        rank, world, generation, device = self.rank
        return Ranks(rank=rank, world_size=world, generation=generation,
                     device=torch.device("cuda", device) if device >= 0 else torch.device("cpu"))

    def has(self, name):
        """Whether the call passes tensor `name` (the spec may lack it: a bias, LayerNorm's beta)."""
        return self.ptrs.get(name) is not None

    def act(self, name):
        """An activation (x, dy, y, dx): M x N with row stride ld."""
        return self.regions.tensor(self.ptrs[name], self.dt, self.M, self.N, self.ld)

    def residual(self, name):
        """A residual or residual_out: M x N with row stride ld, in the residual's dtype."""
        return self.regions.tensor(self.ptrs[name], self.rdt, self.M, self.N, self.ld)

    def quantized(self, name):
        """A quantized output: M x N with row stride ld, in the spec's fp8 dtype."""
        return self.regions.tensor(self.ptrs[name], self.qdt, self.M, self.N, self.ld)

    def scales(self, name, group):
        """Computed fp32 scales, one per `group` columns of each row: M x ceil(N / group)."""
        groups = -(-self.N // group)
        return self.regions.tensor(self.ptrs[name], "fp32", self.M, groups, groups)

    def scalar(self, name):
        """A given fp32 value (a static scale), as a 1-element tensor."""
        return self.regions.tensor(self.ptrs[name], "fp32", 1, 1, 1)[0]

    def vec(self, name):
        """A weight or its gradient; None where the spec has none (LayerNorm's affine=nobias|none)."""
        return self.regions.tensor(self.ptrs[name], self.wdt, 1, self.N, self.N)[0] if self.has(name) else None

    def store(self, name, got, out):
        _store(name, got, out)

    def store_vec(self, name, got):
        if self.has(name):
            _store(name, got, self.vec(name))

    def stat(self, name):
        return self.regions.tensor(self.ptrs[name], "fp32", self.M, 1, 1)[:, 0]

    def store_stat(self, name, got):
        """A statistic saved in x's dtype (stats=T) widens exactly into the fp32 buffer."""
        if self.sdt != "fp32" and got is not None and got.dtype == _torch_dtype(self.sdt):
            got = got.float()
        _store(name, got, self.stat(name))

    def saved_stat(self, name):
        """What the variant's backward is given: the saved values, in the dtype it saved them in."""
        s = self.stat(name)
        return s if self.sdt == "fp32" else s.to(_torch_dtype(self.sdt))


def _graph_key(req):
    """What a captured graph is replayable for: the variant, entry point, shape
    and spec, and each tensor's place in the regions. Regions are numbered
    in the order the tensors (by name) first name them: ulpcheck allocates
    fresh regions for every run, so their own ids differ from call to call.
    Also the request's region ids in that order."""
    order, tensors = {}, []
    for name in sorted(req["ptrs"]):
        where = req["ptrs"][name]
        if where is None:
            tensors.append([name])
            continue
        region, offset = where
        index = order.setdefault(int(region), len(order))
        tensors.append([name, index, offset, req["regions"][str(region)]["bytes"]])
    key = json.dumps([req["variant"], req["entry"], req["shape"], req.get("spec", {}), tensors], sort_keys=True)
    return key, order


class _StaticRegions:
    """Worker-owned copies of a request's regions, at fixed addresses: what a
    captured CUDA graph reads and writes on every replay. `bytes` is keyed by
    the region ids of the request bound last (bind)."""

    def __init__(self, regions, order):
        import torch
        self.copies = [None] * len(order)
        for region, index in order.items():
            self.copies[index] = torch.empty_like(regions.bytes[region])
        self.bind(order)

    def bind(self, order):
        self.order = order
        self.bytes = {region: self.copies[index] for region, index in order.items()}

    def tensor(self, where, dtype, rows, cols, ld):
        return _tensor_in(self.bytes, where, dtype, rows, cols, ld)

    def copy_from(self, regions):
        for region in self.order:
            self.bytes[region].copy_(regions.bytes[region])

    def copy_to(self, regions):
        for region in self.order:
            regions.bytes[region].copy_(self.bytes[region])


class _CapturedGraphs:
    """A cuda_graphs variant's calls, as production serving runs them (vLLM,
    SGLang): per shape, an eager warm-up call, then the call captured into a
    torch.cuda.CUDAGraph over static buffers; each call copies ulpcheck's
    regions in, replays the graph and copies them back out. The first replay
    of each graph is cold: a kernel wrong only then (state its capture left,
    aiter #4888's class) differs from the later replays of the same case."""

    KEEP = 4  # graphs kept (each holds its static buffers and memory pool)

    def __init__(self):
        self.graphs = {}  # key -> (graph, static regions), oldest first

    def run(self, variant, run, req, regions):
        """Runs the call through its shape's graph; whether this was the graph's first replay."""
        import torch
        key, order = _graph_key(req)
        entry = self.graphs.pop(key, None)
        first_replay = entry is None
        if entry is None:
            while len(self.graphs) >= self.KEEP:
                del self.graphs[next(iter(self.graphs))]
            static = _StaticRegions(regions, order)
            static.copy_from(regions)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # the warm-up torch.cuda.graph asks for: lazy initialisation, compiles
                run(variant, Call(req, static))
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                run(variant, Call(req, static))
            entry = (graph, static)
        self.graphs[key] = entry  # the newest last
        graph, static = entry
        static.bind(order)
        static.copy_from(regions)  # again for a new graph: its warm-up and capture may have written the inputs
        graph.replay()
        static.copy_to(regions)
        return first_replay


_captured = _CapturedGraphs()


def execute(req):
    """Serves one call; whether it was cold in a way only the worker knows
    (a captured graph's first replay)."""
    import torch
    variant = ulpcheck.find(req["variant"])
    if variant is None:
        raise ValueError(f"this worker has no variant {req['variant']!r}")
    run = ops.serving(req["entry"]).entries[req["entry"]]
    sm_count, ctas, perturb = req["env"]
    regions = Regions(req["regions"])
    cold = False
    try:
        cuda = variant.backend == "cuda"
        # A rank's own device (its tensors'; peers' communication buffers may lie on others).
        rank_device = req.get("rank", [0, 1, 0, -1])[3]
        device = (torch.device("cuda", rank_device) if rank_device >= 0 else
                  next((t.device for t in regions.bytes.values() if t.is_cuda), None))
        if cuda:
            torch.cuda.set_device(device)
        if cuda:
            _poison_allocator(device, 4 * sum(t.numel() for t in regions.bytes.values()))
        side = _perturb_schedule(device) if cuda and perturb else None
        with torch.no_grad():
            if variant.cuda_graphs:
                cold = _captured.run(variant, run, req, regions)
            else:
                run(variant, Call(req, regions))
        if cuda:
            torch.cuda.synchronize()
            del side
    finally:
        regions.close()
    return cold


def _cuda_context_lost():
    """After an error: is the worker's CUDA context still usable?"""
    try:
        import torch
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001 - a sticky error makes every CUDA call fail
        return True


def join_ranks(rank, ranks, rendezvous, backend):
    """A rank's worker joins its peers' torch.distributed process group (the
    default group) before it says ready: NCCL on the GPU, rank r on GPU r;
    gloo on the host."""
    import datetime
    import torch
    import torch.distributed as dist
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=rendezvous, rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(seconds=600))


def serve(fd):
    sock = socket.socket(fileno=fd)
    send(sock, {"ready": True})  # the kernels files are loaded: calls are timed from here
    while True:
        req = receive(sock)
        if req is None:
            return 0
        try:
            reply = {"ok": True, "cold": True} if execute(req) else {"ok": True}
        except Exception as e:  # noqa: BLE001 - every error of the kernel is the case's failure
            fatal = _cuda_context_lost()
            where = traceback.extract_tb(e.__traceback__)[-1]
            reply = {"ok": False, "fatal": fatal,
                     "error": f"{req.get('variant')} {req.get('entry')}: {type(e).__name__}: {e} "
                              f"(at {os.path.basename(where.filename)}:{where.lineno})"}
        send(sock, reply)
        if not reply["ok"] and reply["fatal"]:
            return 3


class KernelsFileError(Exception):
    """A kernels file that cannot be used, said in one line (ulpcheck shows it)."""


def load_all(paths):
    """Loads every kernels file; the provenance of each variant it registers."""
    origin = {}
    for path in paths:
        before = {v.name for v in ulpcheck.variants()}
        try:
            load_kernels(path)
        except ModuleNotFoundError as e:
            # Most often torch itself: ulpcheck started an interpreter without it.
            raise KernelsFileError(
                f"{path} imports the module {e.name!r}, which the Python interpreter {sys.executable} lacks: "
                f"install it there, or set ULPCHECK_PYTHON to a Python that has it") from e
        except KernelsFileError:
            raise
        except SystemExit as e:
            raise KernelsFileError(f"{path}: {e}") from e
        except Exception as e:  # noqa: BLE001 - whatever the file raised, said in one line (the traceback on stderr)
            traceback.print_exc()
            raise KernelsFileError(f"{path} raised {type(e).__name__} while loading: {e} (traceback above)") from e
        added = [v for v in ulpcheck.variants() if v.name not in before]
        if not added:
            raise KernelsFileError(
                f"{path} registers no variant: a kernels file calls "
                f"{' or '.join(f'ulpcheck.{op}(...)' for op in ops.OPS)} "
                f"(see python/ulpcheck/__init__.py)")
        for v in added:
            origin[v.name] = provenance(path, v)
    return origin


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m ulpcheck.worker")
    p.add_argument("--python", action="append", required=True, help="a kernels file (repeatable)")
    p.add_argument("--fd", type=int, help="the socket to the coordinator")
    p.add_argument("--describe", action="store_true", help="print the variants as JSON and exit")
    p.add_argument("--rank", type=int, help="a multi-rank op's rank this worker serves")
    p.add_argument("--ranks", type=int, help="... of how many")
    p.add_argument("--rendezvous", help="torch.distributed's init_method for the ranks' group")
    p.add_argument("--dist-backend", choices=("nccl", "gloo"), help="the group's backend")
    args = p.parse_args(argv)
    try:
        origin = load_all(args.python)
    except KernelsFileError as e:
        if args.describe:  # the coordinator reads {"error": ...} and says it
            json.dump({"error": str(e)}, sys.stdout)
        else:
            print(f"ulpcheck worker: {e}", file=sys.stderr)
        return 2
    if args.describe:
        json.dump([dict(v.describe(), origin=origin[v.name]) for v in ulpcheck.variants()], sys.stdout)
        return 0
    if args.fd is None:
        p.error("--fd is required to serve")
    if args.rank is not None:
        join_ranks(args.rank, args.ranks, args.rendezvous, args.dist_backend)
    return serve(args.fd)


if __name__ == "__main__":
    sys.exit(main())
