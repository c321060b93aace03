"""A kernels file that registers nothing (a typo'd decorator, an import that
silently did nothing): `--python` must refuse it, not run the built-in
variants and pass."""

import ulpcheck  # noqa: F401 - imported as a kernels file would, then nothing is registered
