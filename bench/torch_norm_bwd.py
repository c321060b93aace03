"""PyTorch's F.rms_norm / F.layer_norm backward on the same shapes and the same
byte count as bench/norm_bwd_bench, median of CUDA-event timed repetitions after
warm-up.  Gradients are taken with torch.autograd.grad for x and the weight (and,
for layernorm, the bias).  Bytes counted:
  rmsnorm:   x, dy read; dx written; w, rstd read; dw written
             3*M*N*b + 2*N*b + 4*M
  layernorm: x, dy read; dx written; gamma, mean, rstd read; dgamma, dbeta written
             3*M*N*b + 3*N*b + 2*4*M
Usage: python3 torch_norm_bwd.py [--op rmsnorm|layernorm] [--dtype bf16] [--reps 50] MxN ..."""
import argparse
import re

import torch
import torch.nn.functional as F


def shape(text):
    m = re.fullmatch(r"([0-9]+)x([0-9]+)", text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise argparse.ArgumentTypeError(f"bad shape '{text}' (expected MxN with positive integers M and N)")
    return int(m.group(1)), int(m.group(2))


def positive(text):
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return v


def setup(op, M, N, dtype, size):
    """Inputs, the forward output, the tensors to differentiate and the bytes moved."""
    x = torch.randn(M, N, device="cuda", dtype=dtype, requires_grad=True)
    w = (1 + 0.5 * torch.randn(N, device="cuda", dtype=dtype)).requires_grad_()
    if op == "rmsnorm":
        y = F.rms_norm(x, (N,), w, eps=1e-6)
        return y, (x, w), 3 * M * N * size + 2 * N * size + 4 * M
    b = (0.25 * torch.randn(N, device="cuda", dtype=dtype)).requires_grad_()
    y = F.layer_norm(x, (N,), w, b, eps=1e-6)
    return y, (x, w, b), 3 * M * N * size + 3 * N * size + 2 * 4 * M


def main():
    p = argparse.ArgumentParser()
    p.add_argument("shapes", nargs="+", type=shape, metavar="MxN")
    p.add_argument("--op", default="rmsnorm", choices=["rmsnorm", "layernorm"])
    p.add_argument("--dtype", default="bf16", choices=["fp32", "fp16", "bf16"])
    p.add_argument("--reps", type=positive, default=50)
    a = p.parse_args()
    if not torch.cuda.is_available():
        p.exit(4, "no GPU: torch.cuda.is_available() is False\n")
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    size = torch.finfo(dtype).bits // 8
    fn = {"rmsnorm": "F.rms_norm", "layernorm": "F.layer_norm"}[a.op]
    print(f"# {a.op} backward, torch {torch.__version__} {fn} on {torch.cuda.get_device_name()}, "
          f"dtype {a.dtype}, median of {a.reps} reps")
    print(f"#{'M':>7} {'N':>7} {'time(us)':>12} {'GB/s':>10}")
    for M, N in a.shapes:
        y, wrt, moved = setup(a.op, M, N, dtype, size)
        dy = torch.randn(M, N, device="cuda", dtype=dtype)
        for _ in range(5):
            torch.autograd.grad(y, wrt, dy, retain_graph=True)
        torch.cuda.synchronize()
        times = []
        for _ in range(a.reps):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.autograd.grad(y, wrt, dy, retain_graph=True)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e-3)
        t = sorted(times)[len(times) // 2]
        print(f" {M:>7} {N:>7} {t * 1e6:>12.1f} {moved / t / 1e9:>10.1f}", flush=True)
        del y, wrt, dy


if __name__ == "__main__":
    main()
