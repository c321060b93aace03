"""PyTorch's own CUDA norms through the adapters the package ships
(ulpcheck/adapters/torch_ops.py), on the GPU; skipped where torch sees none."""

from pathlib import Path

import pytest
import torch

import ulpcheck.adapters

TORCH_OPS = Path(ulpcheck.adapters.__file__).resolve().parent / "torch_ops.py"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device for torch")
@pytest.mark.parametrize("kernel", ["torch_rms_norm", "torch_layer_norm"])
def test_torch_cuda_norm(ulpcheck, kernel):
    ulpcheck.check(TORCH_OPS, kernel=kernel, cases=300)
