"""PyTorch's F.rms_norm backward on the same shapes and the same byte count as
bench/rmsnorm_bwd_bench (x, dy read; dx written; w, rstd, dw), median of CUDA-event
timed repetitions after warm-up.  Usage: python3 torch_rms_norm_bwd.py [--dtype bf16] MxN ..."""
import argparse

import torch
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser()
    p.add_argument("shapes", nargs="+")
    p.add_argument("--dtype", default="bf16", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--reps", type=int, default=50)
    a = p.parse_args()
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    size = torch.finfo(dtype).bits // 8
    print(f"# torch {torch.__version__} F.rms_norm backward on {torch.cuda.get_device_name()}, "
          f"dtype {a.dtype}, median of {a.reps} reps")
    print(f"#{'M':>7} {'N':>7} {'time(us)':>12} {'GB/s':>10}")
    for shape in a.shapes:
        M, N = (int(v) for v in shape.split("x"))
        x = torch.randn(M, N, device="cuda", dtype=dtype, requires_grad=True)
        w = (1 + 0.5 * torch.randn(N, device="cuda", dtype=dtype)).requires_grad_()
        dy = torch.randn(M, N, device="cuda", dtype=dtype)
        y = F.rms_norm(x, (N,), w, eps=1e-6)
        for _ in range(5):
            torch.autograd.grad(y, (x, w), dy, retain_graph=True)
        torch.cuda.synchronize()
        times = []
        for _ in range(a.reps):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.autograd.grad(y, (x, w), dy, retain_graph=True)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e-3)
        t = sorted(times)[len(times) // 2]
        moved = 3 * M * N * size + 2 * N * size + 4 * M
        print(f" {M:>7} {N:>7} {t * 1e6:>12.1f} {moved / t / 1e9:>10.1f}")


if __name__ == "__main__":
    main()
