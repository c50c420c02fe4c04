"""Shards streamed through persistent DataLoader workers from a work queue the main process refills
each epoch (``python dataloader_epoch_queue.py``).

An ``IterableDataset`` hands shard names to its two workers through a ``multiprocessing.Queue`` that
``start_epoch`` replaces with a fresh one each epoch. With ``persistent_workers=True`` the workers
keep the dataset as it was when they started, with the first epoch's queue: after epoch 0 they wait
in that queue's ``get()`` (one in its read, the other for the queue's lock) for shards that only go
into the new queue, which no worker reads. The trainer waits for a batch for ever.

READY (``{"pid", "workers"}``) once the main thread and both workers sleep after the first epoch.
"""

from __future__ import annotations

import os
import random

import _common
import torch
from torch.utils.data import DataLoader, IterableDataset

NUM_WORKERS = 2
SHARDS = 6


class ShardStream(IterableDataset):
    def __init__(self, shards: list):
        self.shards = shards
        self.work = torch.multiprocessing.Queue()

    def start_epoch(self, epoch: int) -> None:
        order = list(self.shards)
        random.Random(epoch).shuffle(order)
        self.work = torch.multiprocessing.Queue()  # a fresh queue, so nothing of the last epoch leaks in
        for shard in order:
            self.work.put(shard)
        for _ in range(NUM_WORKERS):
            self.work.put(None)  # one end marker per worker

    def __iter__(self):
        while True:
            shard = self.work.get()
            if shard is None:
                return
            generator = torch.Generator().manual_seed(shard)
            for _ in range(64):
                yield torch.randint(0, 100, (16,), generator=generator)


def main() -> None:
    torch.set_num_threads(1)
    stream = ShardStream(list(range(SHARDS)))
    loader = DataLoader(stream, batch_size=16, num_workers=NUM_WORKERS, persistent_workers=True)
    model = torch.nn.Sequential(torch.nn.Embedding(100, 8), torch.nn.Flatten(), torch.nn.Linear(128, 100))
    opt = torch.optim.SGD(model.parameters(), 1e-2)
    for epoch in range(10):
        stream.start_epoch(epoch)
        if epoch == 1:
            ready_when_all_sleep([w.pid for w in loader._iterator._workers])
        steps = 0
        for batch in loader:
            loss = torch.nn.functional.cross_entropy(model(batch), batch[:, 0])
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        print(f"epoch {epoch} done ({steps} steps)", flush=True)


def ready_when_all_sleep(workers: list) -> None:
    pids = [os.getpid(), *workers]
    _common.ready_when(lambda: all(_common.sleeping_steadily(pid) for pid in pids), lambda: {"workers": workers})


if __name__ == "__main__":
    main()
