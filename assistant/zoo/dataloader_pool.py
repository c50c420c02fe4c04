"""Hang: a DataLoader worker calls ``Pool.map`` on a ``multiprocessing.Pool`` its trainer made before
the DataLoader forked it.

``python dataloader_pool.py``. The trainer makes a pool to decode samples, then a torch
``DataLoader`` (``num_workers=1``, fork) over a Dataset whose ``__getitem__`` uses it::

    pool = multiprocessing.get_context("fork").Pool(2)      # in the trainer, before the DataLoader
    parts = pool.map(decode_part, range(4))                  # in the DataLoader worker: no timeout

fork copies only the calling thread: the worker has the pool's queues but none of the threads that
hand tasks to the pool's processes and collect their results (Pool's _handle_tasks and
_handle_results), so ``map`` waits for ever in the worker. The pool's two processes, children of the
trainer, idle in their task queue; they are not DataLoader workers. The trainer waits for its batch.

READY (``{"pid", "worker_pid", "pool_pids"}``): once the DataLoader worker has sat in ``map`` (a
futex wait) for 5 consecutive samples.
"""

from __future__ import annotations

import multiprocessing
import os

import _common


def decode_part(index: int) -> int:
    return index * index


def main() -> None:
    import psutil
    import torch
    from torch.utils.data import DataLoader, Dataset

    pool = multiprocessing.get_context("fork").Pool(2)
    pool_pids = [p.pid for p in pool._pool]

    class Samples(Dataset):
        def __len__(self) -> int:
            return 8

        def __getitem__(self, index: int):
            return torch.tensor(pool.map(decode_part, range(4)), dtype=torch.float32)  # no timeout

    def worker_waits() -> bool:
        workers = [c for c in psutil.Process().children() if c.pid not in pool_pids]
        return len(workers) == 1 and _common.sleeping_steadily(workers[0].pid)

    def found() -> dict:
        workers = [c.pid for c in psutil.Process().children() if c.pid not in pool_pids]
        return {"pid": os.getpid(), "worker_pid": workers[0], "pool_pids": pool_pids}

    _common.ready_when(worker_waits, found)
    torch.set_num_threads(1)
    for step, batch in enumerate(DataLoader(Samples(), batch_size=1, num_workers=1)):
        print(f"step {step}: {batch.sum().item():.0f}", flush=True)


if __name__ == "__main__":
    main()
