"""DataLoader workers that compute in ``__getitem__``; one scenario per argument.

- ``slow``: not hung. Every sample costs ``SLOW_SECONDS`` of pure-Python CPU work (a decode
  stand-in); ``DataLoader(num_workers=2, batch_size=1)``: a batch every ``SLOW_SECONDS / 2`` s or
  so, and between two batches the main thread sleeps in ``_try_get_data`` while both workers run.
  The GPU-idle, log-silent picture of a job bound by its input pipeline.
- ``stuck``: hung. Sample ``STUCK_INDEX`` never finishes (the same work, with a condition that never
  holds); the other worker delivers its prefetched batches and then idles in its index queue's get.

Where it is (py-spy): main process MainThread in ``_PollLikeSelector.select`` under
``Queue.get`` <- ``_MultiProcessingDataLoaderIter._try_get_data``; a computing worker in
``HeavyDataset.__getitem__`` (dataloader_compute.py) under ``_MapDatasetFetcher.fetch`` <-
``_worker_loop``, state R, a CPU's worth of time.

READY (``{"pid", "workers", "scenario"}``, ``workers``: the worker PIDs that compute): written by a
helper thread of the main process once its main thread has slept in ``_try_get_data`` for a few
consecutive samples, each computing worker is running (state R) and, for ``stuck``, the batches
before ``STUCK_INDEX`` were consumed and the other worker sleeps steadily.
"""

from __future__ import annotations

import os
import sys
import time

import _common
import torch
from torch.utils.data import DataLoader, Dataset

SCENARIO = sys.argv[1] if len(sys.argv) > 1 else "slow"
SLOW_SECONDS = 20.0  # far longer than a diagnosis window: no batch arrives while the tool looks
STUCK_INDEX = 4


class HeavyDataset(Dataset):
    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, index: int):
        if SCENARIO == "slow" or index == STUCK_INDEX:
            _common.write_marker(f"computing-{os.getpid()}", index=index)
            limit = SLOW_SECONDS if SCENARIO == "slow" else float("inf")
            started, total = time.monotonic(), 0
            while time.monotonic() - started < limit:
                for k in range(2000):
                    total += (k * index) % 7
            return torch.tensor([float(total)])
        return torch.tensor([float(index)])


def computing_workers() -> list:
    return sorted(int(p.name.split("-", 1)[1]) for p in _common.workdir().glob("computing-*"))


def train() -> None:
    torch.set_num_threads(1)
    loader = DataLoader(HeavyDataset(), batch_size=1, num_workers=2)
    batches = iter(loader)  # forks the workers before the helper thread exists
    worker_pids = [w.pid for w in batches._workers]
    seen = []
    waits = _common._main_sleeps_in("_try_get_data")
    expected = 2 if SCENARIO == "slow" else 1

    def reached() -> bool:
        busy = computing_workers()
        if len(busy) < expected or not all(_common.task_state(pid) == "R" for pid in busy):
            return False
        if SCENARIO == "stuck":
            idle = [pid for pid in worker_pids if pid not in busy]
            if len(seen) != STUCK_INDEX or not all(_common.sleeping_steadily(pid) for pid in idle):
                return False
        return waits()

    _common.ready_when(reached, lambda: {"pid": os.getpid(), "workers": computing_workers(), "scenario": SCENARIO})
    for batch in batches:
        seen.append(int(batch[0][0]) if SCENARIO == "stuck" else len(seen))
        if len(seen) % 100 == 0:
            print(f"step {len(seen)}", flush=True)


if __name__ == "__main__":
    if SCENARIO not in ("slow", "stuck"):
        sys.exit(f"usage: dataloader_compute.py [slow|stuck]; not {SCENARIO!r}")
    train()
