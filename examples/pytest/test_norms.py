"""ulpcheck from pytest (pip install ./python, then pytest here): the
correct kernel passes, the one computing in bf16/fp16 fails with its shrunk
case, worst elements and a repro line."""


def test_my_rms_norm(ulpcheck):
    ulpcheck.check("kernels.py", kernel="my_rms_norm", cases=100)


def test_my_rms_norm_in_activation_dtype(ulpcheck):
    ulpcheck.check("kernels.py", kernel="my_rms_norm_in_activation_dtype", cases=100)
