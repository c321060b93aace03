"""ulpcheck from pytest (pip install ./python, then pytest here): the
correct kernel passes, the one computing in bf16 fails with its shrunk
case, worst elements and a repro line. The correct kernel is also checked
as one pytest item per property x dtype cell."""

import pytest

from ulpcheck.pytest_plugin import cells


def test_my_rms_norm(ulpcheck):
    ulpcheck.check("kernels.py", kernel="my_rms_norm", cases=100)


def test_my_rms_norm_in_activation_dtype(ulpcheck):
    ulpcheck.check("kernels.py", kernel="my_rms_norm_in_activation_dtype", cases=100)


@pytest.mark.parametrize("kernel,prop,dtype", cells("kernels.py", kernel="my_rms_norm"))
def test_my_rms_norm_cell(ulpcheck, kernel, prop, dtype):
    ulpcheck.check("kernels.py", kernel=kernel, properties=prop, dtypes=dtype, cases=20)
