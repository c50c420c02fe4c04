"""Not hung: one long call of a library's compute routine, log silent (no cause; undecided).

``python library_compute.py [scenario]``, minutes of CPU in one call, a few MiB to a few hundred MiB
of memory, the main thread's stack on one line for the whole window (state R, busy CPU), as a large
SVD, a solver's ``fit`` or an index build does. It ends on its own; one window cannot tell it from a
routine that never returns.

- ``convolve`` (the default): numpy's ``convolve`` of two arrays of a million samples each, about
  10^12 multiply-adds in one C call. Its innermost Python frame is numpy's::

      convolve (numpy/_core/numeric.py)
      main (library_compute.py)

- ``torch_svd``: ``torch.linalg.svd`` of a 4000x4000 float64 matrix, again and again, called from the
  job's own line: no Python frame of the library, only its machine code under that line
  (py-spy --native: ``mkl_blas_avx512_dgemm_kernel_0 (libtorch_cpu.so)``, ``main (library_compute.py)``).
- ``numpy_matmul``: ``a @ a`` of a 6000x6000 float64 array, again and again, from the job's own line
  (BLAS under it: ``dgemm_kernel_... (libscipy_openblas64_...so)``).

READY (``{"pid", "scenario"}``): written just before the first call.
"""

from __future__ import annotations

import sys

import _common
import numpy as np

SCENARIO = sys.argv[1] if len(sys.argv) > 1 else "convolve"
SAMPLES = 1_000_000


def convolve() -> None:
    signal = np.random.default_rng(0).random(SAMPLES)
    kernel = np.random.default_rng(1).random(SAMPLES)
    print(f"filtering {SAMPLES} samples", flush=True)
    _common.mark_ready(scenario=SCENARIO)
    filtered = np.convolve(signal, kernel)  # minutes of work in one C call
    print(f"filtered: {filtered.shape}", flush=True)


def torch_svd() -> None:
    import torch

    matrix = torch.randn(4000, 4000, dtype=torch.float64)
    print("decomposing", flush=True)
    _common.mark_ready(scenario=SCENARIO)
    while True:
        torch.linalg.svd(matrix)  # seconds to minutes of LAPACK and BLAS in one call of the job's own line


def numpy_matmul() -> None:
    a = np.random.default_rng(0).random((6000, 6000))
    print("multiplying", flush=True)
    _common.mark_ready(scenario=SCENARIO)
    while True:
        a @ a  # noqa: B018  -- seconds of BLAS in one operator of the job's own line


if __name__ == "__main__":
    {"convolve": convolve, "torch_svd": torch_svd, "numpy_matmul": numpy_matmul}[SCENARIO]()
