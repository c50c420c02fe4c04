"""Hang: a curriculum batch sampler picks each batch's difficulty from the loss of the previous step,
which the training loop puts on a queue; the DataLoader (2 workers) asks the sampler for several
batches of indices ahead (prefetch) before the loop has run once, so the sampler waits in
``feedback.get()`` for a loss the loop would put only after that batch (the sixteenth hunt's j11:
"waits for an item from a queue", a generic timeout fix)::

    def __iter__(self):
        for b in range(len(self)):
            if b > 0:
                last_loss = feedback.get()       # the loop puts it after each step
            yield indices

READY (``{"pid"}``) once the main thread sleeps in the sampler's get.
"""

from __future__ import annotations

import os
import queue
import threading

import _common
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

feedback: queue.Queue = queue.Queue()
waiting = threading.Event()


class Toy(Dataset):
    def __len__(self) -> int:
        return 1024

    def __getitem__(self, i: int):
        return torch.full((8,), float(i)), i % 4


class CurriculumBatchSampler(Sampler):
    def __init__(self, n: int, batch: int) -> None:
        self.n, self.batch = n, batch

    def __len__(self) -> int:
        return self.n // self.batch

    def __iter__(self):
        level = 0.5
        for b in range(len(self)):
            if b > 0:
                waiting.set()
                last_loss = feedback.get()  # the loss of the previous step
                level = min(1.0, level * (1.1 if last_loss < 1.0 else 0.9))
            top = max(self.batch, int(self.n * level))
            yield [(b * 7 + k) % top for k in range(self.batch)]


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = torch.nn.Linear(8, 4)
    loader = DataLoader(Toy(), batch_sampler=CurriculumBatchSampler(1024, 32), num_workers=2)
    _common.ready_when(
        lambda: waiting.is_set() and _common.sleeping_steadily(os.getpid()), lambda: {"pid": os.getpid()}
    )
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        feedback.put(loss.item())
        _common.log(f"step {step} loss {loss.item():.3f}")
