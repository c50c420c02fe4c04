"""Hang: DataLoader workers gated on a ``multiprocessing.Event`` that the training loop clears to
pause loading during evaluation and never sets again (the fourteenth hunt's j22)::

    self.loading.wait()              # each worker, for each sample
    ...
    for epoch in range(epochs):
        for step, batch in enumerate(loader): ...
        loading.clear()              # pause the workers while evaluating
        evaluate(model)
        # the set() that should resume them is missing

The first epoch runs; in the second, both persistent workers wait in ``__getitem__`` and the main
process waits for a batch. It was read as "waits for a signal another thread has not sent", the
clear() unnamed.

READY (``{"pid"}``): once the main thread has slept in ``_try_get_data`` for 5 consecutive samples.
"""

from __future__ import annotations

import multiprocessing

import _common
import torch
from torch.utils.data import DataLoader, Dataset


class GatedSamples(Dataset):
    def __init__(self, loading) -> None:
        self.loading = loading

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):
        self.loading.wait()
        return torch.full((4,), float(i))


def evaluate(model: torch.nn.Module) -> float:
    with torch.no_grad():
        return sum(model(torch.ones(8, 4)).sum().item() for _ in range(5))


def main() -> None:
    loading = multiprocessing.Event()
    loading.set()
    loader = DataLoader(GatedSamples(loading), batch_size=16, num_workers=2, persistent_workers=True)
    model = torch.nn.Linear(4, 1)
    _common.ready_when(_common._main_sleeps_in("_try_get_data"))
    for epoch in range(3):
        for step, batch in enumerate(loader):
            model(batch).sum().backward()
            print(f"epoch {epoch} step {step}", flush=True)
        loading.clear()
        print(f"epoch {epoch} eval {evaluate(model):.3f}", flush=True)


if __name__ == "__main__":
    main()
