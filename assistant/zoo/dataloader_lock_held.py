"""Hang: a Dataset guards its shared cache with a ``multiprocessing.Lock``, and the main process
iterates its DataLoader inside ``with ds.cache_lock:`` (the thirteenth hunt's j14)::

    class CachedShards(Dataset):
        def __getitem__(self, i):
            with self.cache_lock:          # each worker, for each sample
                ...

    with ds.cache_lock:
        ds.refresh()
        for x, y in loader:                # the loop inside the lock: the workers wait for it

Both workers wait for the lock in ``__getitem__``, the main process for a batch. It was read as a
lock copied by fork ("start it with spawn", which hangs the same way): a multiprocessing lock is one
semaphore shared with the parent, whose ``with`` block holds it.

READY (``{"pid"}``): once the main thread has slept in ``_try_get_data`` for 5 consecutive samples.
"""

from __future__ import annotations

import multiprocessing

import _common
import torch
from torch.utils.data import DataLoader, Dataset


class CachedShards(Dataset):
    def __init__(self) -> None:
        self.cache_lock = multiprocessing.Lock()
        self.index = list(range(256))

    def refresh(self) -> None:
        self.index = list(range(256))

    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int):
        with self.cache_lock:
            idx = self.index[i]
        return torch.full((8,), float(idx)), idx % 4


def main() -> None:
    ds = CachedShards()
    loader = DataLoader(ds, batch_size=16, num_workers=2)
    _common.ready_when(_common._main_sleeps_in("_try_get_data"))
    with ds.cache_lock:
        ds.refresh()
        print("cache refreshed", flush=True)
        for step, (x, labels) in enumerate(loader):
            print(f"step {step} mean {x.mean().item():.2f} labels {labels.tolist()}", flush=True)


if __name__ == "__main__":
    main()
