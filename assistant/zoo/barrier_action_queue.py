"""Hang: three shard threads meet each step at a threading.Barrier whose action merges their gradients
from a queue; the threads put their gradient only after the barrier. The last thread to arrive runs
the action, which waits in ``grads.get()`` while the other two wait in ``barrier.wait()`` (the
sixteenth hunt's j09: "the thread that should put items has ended", which was false)::

    barrier = threading.Barrier(3, action=merge)      # merge: [grads.get() for _ in range(3)]
    def worker(i):
        barrier.wait()
        grads.put(g)                                  # the slip: after the barrier, not before

READY (``{"pid"}``) once every shard thread sleeps.
"""

from __future__ import annotations

import os
import queue
import threading

import _common

SHARDS = 3
grads: queue.Queue = queue.Queue()
arrived: list = []


def merge() -> None:
    parts = [grads.get() for _ in range(SHARDS)]  # runs in the last thread to reach the barrier
    _common.log(f"merged {len(parts)} shards")


barrier = threading.Barrier(SHARDS, action=merge)


def worker(i: int) -> None:
    for _ in range(100):
        gradient = sum(j * 0.5 for j in range(1000))
        arrived.append(threading.get_native_id())
        barrier.wait()
        grads.put(gradient)


if __name__ == "__main__":
    threads = [threading.Thread(target=worker, args=(i,), name=f"shard-{i}") for i in range(SHARDS)]
    for thread in threads:
        thread.start()
    _common.ready_when(
        lambda: len(arrived) >= SHARDS and all(_common.sleeping_steadily(os.getpid(), t.native_id) for t in threads),
        lambda: {"pid": os.getpid()},
    )
    for thread in threads:
        thread.join()
