"""Hang: two bounded multiprocessing Queues in a cycle (``python mp_queue_cycle.py``; the fifteenth
hunt's j04).

The main process puts a whole epoch of 32 KiB samples into ``tasks`` (maxsize=8) before it reads
any result; the augment worker puts each result into ``results`` (maxsize=4). After 4 results the
worker blocks in ``results.put()``, stops taking tasks, and the main process blocks in
``tasks.put()``: each waits for the other. Both queues' feeder threads are blocked writing into
full pipes (pipe_write), which read as output blocked on stdout (90%, "drain the pipe").

READY (``{"pid", "worker_pid"}``) once the main thread has slept in ``put`` for a few samples.
"""

from __future__ import annotations

import multiprocessing as mp
import os

import _common

SAMPLE = bytes(32 * 1024)


def augment(tasks, results) -> None:
    while True:
        item = tasks.get()
        if item is None:
            return
        index, sample = item
        results.put((index, sample[::-1]))


def run_epoch(size: int, tasks, results) -> int:
    for index in range(size):
        tasks.put((index, SAMPLE))  # the whole epoch first: the queues are bounded to cap memory
    return len([results.get() for _ in range(size)])


if __name__ == "__main__":
    tasks, results = mp.Queue(maxsize=8), mp.Queue(maxsize=4)
    worker = mp.Process(target=augment, args=(tasks, results), name="augment-0")
    worker.start()
    for epoch, size in enumerate((3, 3, 48)):
        if size > 8:
            _common.ready_when(_common._main_sleeps_in("put"), lambda: {"pid": os.getpid(), "worker_pid": worker.pid})
        print(f"epoch {epoch}: {run_epoch(size, tasks, results)} samples augmented", flush=True)
