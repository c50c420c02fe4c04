"""Hang: a thread pool whose workers all wait for room in a queue that only a task queued behind
them drains (``python pool_queued_behind.py``).

``ThreadPoolExecutor(max_workers=2)`` is given two shard readers, then the batch packer. The readers
fill a bounded queue of samples and block in ``put()`` once it is full; the packer, the one reader of
that queue, waits in the executor's work queue for a free worker, which never comes. The trainer
waits in ``get()`` on the packer's batch queue (the fourteenth hunt's j09, read as "put a timeout on
every wait").

READY (``{"pid"}``) once the main thread has slept in ``get`` for a few samples and both readers are
blocked in ``put``.
"""

from __future__ import annotations

import os
import queue
from concurrent.futures import ThreadPoolExecutor

import _common

samples: queue.Queue = queue.Queue(maxsize=16)
batches: queue.Queue = queue.Queue(maxsize=2)


def read_shard(shard: int) -> None:
    for index in range(1_000_000):
        samples.put((shard, index, bytes(256)))


def pack_batches(size: int = 8) -> None:
    while True:
        batches.put([samples.get() for _ in range(size)])


if __name__ == "__main__":
    io_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="io")
    readers = [io_pool.submit(read_shard, shard) for shard in range(2)]
    packer = io_pool.submit(pack_batches)
    print("input pipeline started: 2 shard readers, 1 packer", flush=True)
    _common.ready_when(lambda: samples.full() and _common._main_sleeps_in("get")(), lambda: {"pid": os.getpid()})
    for step in range(1000):
        batch = batches.get()
        print(f"step {step} batch of {len(batch)}", flush=True)
