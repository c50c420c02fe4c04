"""Hang: a training loop on ``queue.get()`` whose producer thread died of an exception.

``python producer_died.py``. A background thread (``prefetch``) reads samples and puts batches into
a ``queue.Queue(maxsize=4)``; the training loop takes them with ``batch = batches.get()`` (no
timeout). At the fourth sample the reader raises (a corrupt record): the exception ends the thread
(``threading.excepthook`` prints its traceback on stderr, the job's log), and the loop waits in
``get`` for a batch no thread will ever put.

READY (``{"pid"}``): once the producer thread is gone and the main thread has slept in ``get`` for
5 consecutive samples; the watcher thread that writes it exits right after.
"""

from __future__ import annotations

import os
import queue
import threading

import _common

CORRUPT_AT = 3


def read_sample(index: int) -> list:
    if index == CORRUPT_AT:
        raise ValueError(f"record {index}: unexpected end of data (corrupt shard)")
    return [float(index)] * 8


def prefetch(batches: queue.Queue) -> None:
    index = 0
    while True:
        batches.put(read_sample(index))
        index += 1


def train() -> None:
    batches: queue.Queue = queue.Queue(maxsize=4)
    producer = threading.Thread(target=prefetch, args=(batches,), name="prefetch", daemon=True)
    producer.start()
    main = threading.main_thread()

    def waiting_alone() -> bool:
        in_get = "get" in _common.stack_functions(main.ident)
        return not producer.is_alive() and in_get and _common.sleeping_steadily(os.getpid(), main.native_id)

    _common.ready_when(waiting_alone)
    step = 0
    while True:
        batch = batches.get()  # no timeout: the bug
        step += 1
        print(f"step {step} loss {sum(batch) / len(batch):.3f}", flush=True)


if __name__ == "__main__":
    train()
