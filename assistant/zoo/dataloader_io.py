"""Hang: a DataLoader worker blocks in I/O inside ``__getitem__`` (cause ``dataloader`` / ``io-stall``).

``DataLoader(num_workers=2, batch_size=1)`` over ``FifoDataset``; sample 4 lives in
``<workdir>/sample-4.fifo``, a FIFO nobody ever writes to, so ``open()`` blocks forever.
``timeout=0`` (the default): the main process waits for batch 4 for ever.

Where it hangs (frames as py-spy 0.4 prints them; older versions drop the ``Class.`` prefix)
- worker 0 (a forked child of the main process; it got indices 0, 2, 4): ``open()`` of the FIFO,
  state S, wchan ``wait_for_partner``. py-spy, MainThread idle::

      FifoDataset.__getitem__ (dataloader_io.py)
      _MapDatasetFetcher.fetch.<locals>.<listcomp> (torch/utils/data/_utils/fetch.py)
      _MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py)
      _worker_loop (torch/utils/data/_utils/worker.py)
      BaseProcess.run (multiprocessing/process.py)
      BaseProcess._bootstrap (multiprocessing/process.py)
      Popen._launch (multiprocessing/popen_fork.py)
      ...                               (the fork: the parent's stack up to iter(loader))
      train (dataloader_io.py)
      <module> (dataloader_io.py)

  plus idle threads ``QueueFeederThread`` and ``Thread-1 (_serve)`` (multiprocessing's resource
  sharer).
- worker 1: served indices 1, 3, 5, 7 and sits idle in ``Queue.get (multiprocessing/queues.py)``
  under ``_worker_loop``, wchan ``poll_schedule_timeout``.
- main process, MainThread idle, wchan ``poll_schedule_timeout`` (it wakes every 5 s to check
  that the workers live)::

      _PollLikeSelector.select (selectors.py)
      wait (multiprocessing/connection.py)
      Connection._poll (multiprocessing/connection.py)
      _ConnectionBase.poll (multiprocessing/connection.py)
      Queue.get (multiprocessing/queues.py)
      _MultiProcessingDataLoaderIter._try_get_data (torch/utils/data/dataloader.py)
      _MultiProcessingDataLoaderIter._get_data (torch/utils/data/dataloader.py)
      _MultiProcessingDataLoaderIter._next_data (torch/utils/data/dataloader.py)
      _BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py)
      train (dataloader_io.py)
      <module> (dataloader_io.py)

  plus two idle ``QueueFeederThread`` threads.

READY (``{"pid", "worker_pid", "fifo", "hang_index", "batches_seen"}``): written by a helper thread
of the main process, which exits right after, once batches 0-3 were consumed, the worker that got
index 4 sleeps in ``wait_for_partner`` and the main thread's stack holds ``_try_get_data``.
"""

from __future__ import annotations

import os
import sys
import threading

import _common
import torch
from torch.utils.data import DataLoader, Dataset

# `python dataloader_io.py 5`: the sample that blocks is 5, which the second worker gets; the first
# one (the lower PID) then sits idle in its index queue's get, as a worker with nothing to do does
HANG_INDEX = int(sys.argv[1]) if len(sys.argv) > 1 else 4


class FifoDataset(Dataset):
    def __init__(self, root, length=64):
        self.root = root
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if index == HANG_INDEX:
            path = self.root / f"sample-{index}.fifo"
            _common.write_marker("worker_opening", fifo=str(path), index=index)
            with open(path, "rb") as f:  # no writer ever comes: blocks in open()
                data = f.read()
            return torch.tensor(len(data))
        return torch.tensor(index)


def train() -> None:
    torch.set_num_threads(1)
    root = _common.workdir()
    fifo = root / f"sample-{HANG_INDEX}.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    seen = []
    main = threading.main_thread()

    def hung() -> bool:
        if len(seen) != HANG_INDEX:
            return False
        opening = _common.read_marker("worker_opening")
        if not opening:
            return False
        if not _common.blocked_in(opening["pid"], None, ("wait_for_partner",), ("openat", "open")):
            return False
        return "_try_get_data" in _common.stack_functions(main.ident)

    def info() -> dict:
        return {
            "pid": os.getpid(),
            "worker_pid": _common.read_marker("worker_opening")["pid"],
            "fifo": str(fifo),
            "hang_index": HANG_INDEX,
            "batches_seen": list(seen),
        }

    loader = DataLoader(FifoDataset(root), batch_size=1, num_workers=2)
    batches = iter(loader)  # forks the workers before the helper thread exists
    _common.ready_when(hung, info)
    for batch in batches:
        seen.append(int(batch[0]))
        print(f"batch {len(seen) - 1}: {batch.tolist()}", flush=True)
    print("finished (should never happen)", flush=True)


if __name__ == "__main__":
    train()
