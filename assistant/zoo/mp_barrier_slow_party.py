"""Healthy: two data-parallel worker processes meet at a ``multiprocessing.Barrier`` after each
round's gradient; worker 1's shard holds the long sequences, so worker 0 waits at the barrier for most
of every round while worker 1 computes (the eighteenth hunt's h04: HUNG, cpu-spin 90%, worker 0 the
culprit)::

    for r in range(rounds):
        g = gradient(shard)                   # worker 1: many times longer
        barrier.wait()                        # all gradients written

READY (``{"pid", "waiting_worker", "computing_worker"}``) once worker 0 sleeps at the barrier and
worker 1 runs.
"""

from __future__ import annotations

import multiprocessing
import os
import time

import _common
import torch


def worker(index: int, barrier, seconds: float) -> None:
    torch.set_num_threads(1)
    weights = torch.randn(256, 256)
    for _ in range(1000):
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            torch.tanh(torch.randn(512, 256) @ weights)
        barrier.wait()


if __name__ == "__main__":
    barrier = multiprocessing.get_context("fork").Barrier(2)
    fast = multiprocessing.get_context("fork").Process(target=worker, args=(0, barrier, 0.2), name="dp-worker-0")
    slow = multiprocessing.get_context("fork").Process(target=worker, args=(1, barrier, 120.0), name="dp-worker-1")
    fast.start()
    slow.start()
    _common.ready_when(
        lambda: _common.sleeping_steadily(fast.pid) and _common.task_state(slow.pid) == "R",
        lambda: {"pid": os.getpid(), "waiting_worker": fast.pid, "computing_worker": slow.pid},
    )
    fast.join()
    slow.join()
