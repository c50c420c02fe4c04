"""Hang: IterableDataset workers keep in step with a ``multiprocessing.Barrier`` after each shard,
and the shards do not split evenly (the seventeenth hunt's j05)::

    def __iter__(self):
        info = get_worker_info()
        for shard in self.shards[info.id :: info.num_workers]:   # 3 shards over 2 workers: 2 + 1
            yield from read(shard)
            self.sync.wait()                                    # Barrier(2): the other worker too

Worker 1 runs out of shards, and the DataLoader shuts it down: it exits with code 0, a zombie nobody
reaps (torch's _MultiProcessingDataLoaderIter marks an exhausted IterableDataset worker unavailable
and never joins it before the loader ends). Worker 0 waits at the barrier for a party that is gone;
the main process waits for worker 0's next batch. It was read as "worker pid N has exited": the one
that ended normally was blamed, the one that waits was listed as present.

READY (``{"pid", "waiting_worker", "exited_worker"}``) once one worker is a zombie and the other's main
thread sleeps in the barrier.
"""

from __future__ import annotations

import multiprocessing
import os

import _common
import psutil
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class ShardStream(IterableDataset):
    def __init__(self, shards: list, sync) -> None:
        self.shards, self.sync = shards, sync

    def __iter__(self):
        info = get_worker_info()
        for shard in self.shards[info.id :: info.num_workers]:
            for i in range(4):
                yield torch.full((8,), float(shard * 10 + i))
            self.sync.wait()  # the other worker's shard too: it has none left


def workers() -> tuple:
    """(the worker waiting at the barrier, the worker that exited), once both are so."""
    kids = psutil.Process(os.getpid()).children()
    gone = [k.pid for k in kids if k.status() == psutil.STATUS_ZOMBIE]
    waiting = [k.pid for k in kids if k.pid not in gone and _common.sleeping_steadily(k.pid)]
    return (waiting[0], gone[0]) if len(gone) == 1 and len(waiting) == 1 else (None, None)


def main() -> None:
    loader = DataLoader(ShardStream([0, 1, 2], multiprocessing.Barrier(2)), batch_size=2, num_workers=2)
    _common.ready_when(
        lambda: all(workers()) and _common._main_sleeps_in("_try_get_data")(),
        lambda: dict(zip(("waiting_worker", "exited_worker"), workers())),
    )
    for epoch in range(3):
        for step, batch in enumerate(loader):
            _common.log(f"epoch {epoch} step {step} mean {batch.mean().item():.2f}")


if __name__ == "__main__":
    main()
