"""Hang: an IterableDataset starts its prefetch thread in ``__init__``; the DataLoader forks its
workers afterwards, and each worker's copy of the queue has no thread to fill it (the fourteenth
hunt's j01)::

    class PrefetchedShards(IterableDataset):
        def __init__(self):
            self.buffer = queue.Queue(maxsize=32)
            threading.Thread(target=self._prefetch, daemon=True).start()   # in the parent only
        def __iter__(self):
            while True:
                yield self.buffer.get()                                    # a worker's own copy

The workers take the items copied with the queue, then wait in ``get()`` for ever; the main process
waits for a batch. It was read as "make a stuck loader fail" (a timeout), the thread unnamed.

READY (``{"pid"}``): once the main thread has slept in ``_try_get_data`` for 5 consecutive samples.
"""

from __future__ import annotations

import queue
import threading

import _common
import torch
from torch.utils.data import DataLoader, IterableDataset


class PrefetchedShards(IterableDataset):
    def __init__(self) -> None:
        self.buffer: queue.Queue = queue.Queue(maxsize=32)
        self.reader = threading.Thread(target=self._prefetch, name="shard-prefetch", daemon=True)
        self.reader.start()

    def _prefetch(self) -> None:
        index = 0
        while True:
            self.buffer.put(torch.full((4,), float(index)))
            index += 1

    def __iter__(self):
        while True:
            yield self.buffer.get()


def main() -> None:
    shards = PrefetchedShards()
    while not shards.buffer.full():
        threading.Event().wait(0.05)
    loader = DataLoader(shards, batch_size=8, num_workers=2)
    _common.ready_when(_common._main_sleeps_in("_try_get_data"))
    for step, batch in enumerate(loader):
        print(f"step {step} mean {batch.mean().item():.2f}", flush=True)


if __name__ == "__main__":
    main()
