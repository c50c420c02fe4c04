"""Hang: a start handshake in the wrong order (``python handshake_spin.py``; the fifteenth hunt's j08).

The prefetcher child spins (``while not start.value: pass``) on a shared flag that the trainer
raises only after the child's ``ready`` Event, which the child sets only once started: the trainer
waits in ``ready.wait()``, the child burns a CPU. It was read with no cause, and "Raise on NaN/Inf
gradients" first.

READY (``{"pid", "child_pid"}``) once the main thread has slept in ``wait`` for a few samples.
"""

from __future__ import annotations

import multiprocessing as mp
import os

import _common


def prefetcher(start, ready, shared) -> None:
    while not start.value:  # a low-latency start: spin instead of sleeping
        pass
    shared[0] = 1.0
    ready.set()


if __name__ == "__main__":
    start, ready, shared = mp.Value("b", 0), mp.Event(), mp.Array("f", 1024)
    child = mp.Process(target=prefetcher, args=(start, ready, shared), name="prefetcher")
    child.start()
    print("waiting for the prefetcher to be ready", flush=True)
    _common.ready_when(_common._main_sleeps_in("wait"), lambda: {"pid": os.getpid(), "child_pid": child.pid})
    ready.wait()  # the slip: the flag the child spins on is raised only after this
    start.value = 1
    print("training", flush=True)
