"""A correct host RMSNorm whose file notes each Python process that imports
it (its pid and whether it only describes the variants) in the file
$ULPCHECK_TEST_IMPORT_LOG: a run's worker processes must not describe the
files again (each describe an interpreter start and the files' imports, torch
among them), and a description of other files must never be used."""

import os
import sys

import torch

import ulpcheck

if os.environ.get("ULPCHECK_TEST_IMPORT_LOG"):
    with open(os.environ["ULPCHECK_TEST_IMPORT_LOG"], "a") as log:
        log.write(f"{os.getpid()} {'describe' if '--describe' in sys.argv else 'serve'}\n")


def forward(x, w, eps):  # torch.nn.functional.rms_norm's arithmetic (Debian's torch 1.13 has none); no backward
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


ulpcheck.rmsnorm("py_rms_counts_its_imports", forward=forward, backward=None, backend="host", dtypes=("fp32",))
