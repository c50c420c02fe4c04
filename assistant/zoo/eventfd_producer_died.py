"""Hang: a prefetch thread signals each batch it makes on an eventfd, and the training loop blocks
in ``os.eventfd_read`` for the next one; the prefetcher dies of an error at its third batch (the
seventeenth hunt's j12)::

    ready = os.eventfd(0)
    def prefetch():
        ...
        os.eventfd_write(ready, 1)        # never again once it raised
    os.eventfd_read(ready)                # main: waits for ever

It was "blocked in a read of the file eventfd", with the generic "put a timeout on every wait"; the
log's "Exception in thread prefetcher" went unused.

READY (``{"pid"}``) once the prefetcher is gone and the main thread sleeps in its read.
"""

from __future__ import annotations

import os
import threading

import _common

ready = os.eventfd(0)
batches: list = []


def prefetch() -> None:
    for index in range(10):
        if index == 3:
            raise RuntimeError("view size is not compatible with input tensor's size and stride")
        batches.append(index)
        os.eventfd_write(ready, 1)


if __name__ == "__main__":
    prefetcher = threading.Thread(target=prefetch, name="prefetcher")
    prefetcher.start()
    _common.ready_when(lambda: not prefetcher.is_alive() and _common.sleeping_steadily(os.getpid()))
    step = 0
    while True:
        os.eventfd_read(ready)
        while batches:
            _common.log(f"step {step} batch {batches.pop(0)}")
            step += 1
