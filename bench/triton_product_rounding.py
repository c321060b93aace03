#!/usr/bin/env python3
# Run on a GPU machine with torch and Triton: python3 bench/triton_product_rounding.py
# Does Triton round a product of two 16-bit tensors to 16 bits before a .to(fp32)?
# (Liger's llama backward: m = (dY * W).to(fp32); dW += dY * (X * rstd).to(X dtype).)
import torch, triton, triton.language as tl

@triton.jit
def prod(a_ptr, b_ptr, out_ptr, acc_ptr, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    m = o < n
    a = tl.load(a_ptr + o, mask=m, other=0.0)
    b = tl.load(b_ptr + o, mask=m, other=0.0)
    tl.store(out_ptr + o, (a * b).to(tl.float32), mask=m)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    acc += a * b                      # as Liger's dW_row += dY_row * q
    tl.store(acc_ptr + o, acc, mask=m)

for dt in (torch.float16, torch.bfloat16):
    torch.manual_seed(0)
    n = 4096
    a = torch.randn(n, device="cuda").to(dt); b = torch.randn(n, device="cuda").to(dt)
    out = torch.empty(n, device="cuda"); acc = torch.empty(n, device="cuda")
    prod[(1,)](a, b, out, acc, n, BLOCK=n)
    exact = a.float() * b.float()          # exact: two 8/11-bit significands
    rounded = (a * b).float()              # torch: rounded to dt
    print(dt, "(a*b).to(fp32): equals rounded", bool(torch.equal(out, rounded)), "equals exact", bool(torch.equal(out, exact)),
          "| acc += a*b: equals rounded", bool(torch.equal(acc, rounded)), "equals exact", bool(torch.equal(acc, exact)),
          "| elements where rounding matters", int((rounded != exact).sum()))
