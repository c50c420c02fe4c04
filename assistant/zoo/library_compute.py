"""Not hung: one long call of a library's compute routine, log silent (no cause; undecided).

``python library_compute.py``. numpy's ``convolve`` of two arrays of a million samples each: about
10^12 multiply-adds in one C call, minutes of one core, a few MiB of memory. The main thread's
stack stays on one line inside numpy for the whole window (state R, 100% CPU), as a large SVD, a
solver's ``fit`` or an index build does. It ends on its own; one window cannot tell it from a
routine that never returns.

py-spy, MainThread active::

    convolve (numpy/_core/numeric.py)
    main (library_compute.py)
    <module> (library_compute.py)

READY (``{"pid"}``): written just before the call.
"""

from __future__ import annotations

import _common
import numpy as np

SAMPLES = 1_000_000


def main() -> None:
    signal = np.random.default_rng(0).random(SAMPLES)
    kernel = np.random.default_rng(1).random(SAMPLES)
    print(f"filtering {SAMPLES} samples", flush=True)
    _common.mark_ready()
    filtered = np.convolve(signal, kernel)  # minutes of work in one C call
    print(f"filtered: {filtered.shape}", flush=True)


if __name__ == "__main__":
    main()
