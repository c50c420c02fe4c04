"""Hang: children forked while another thread of the parent held a lock they then take.

``python fork_held_lock.py {dataloader|dataloader_get|pool}``. A background thread (``cache-refresh``) takes a
``threading.Lock`` now and then to refresh a cache. The main thread forks children while the
thread holds it: torch DataLoader workers (``dataloader``, the default start method on Linux) or a
``multiprocessing`` fork Pool (``pool``). Each child's ``work`` takes the same lock
(``dataloader_get``: a feature cache's own ``get`` method does, a name queues use too). fork copies
the lock held and only the forking thread, so in every child the lock has no holder and ``work``
waits for ever; the parent waits for batches (or for ``Pool.map``'s results).

To make the fork land inside the critical section every time, the refresher holds the lock from
before the children start until they exist, then goes on refreshing in short holds.

READY (``{"pid", "children"}``): once every child sleeps steadily in its futex wait.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time

import _common

CACHE_LOCK = threading.Lock()
HELD = threading.Event()
FORKED = threading.Event()
WORKERS = 2


def refresh_cache() -> None:
    with CACHE_LOCK:
        HELD.set()
        FORKED.wait()
    while True:
        time.sleep(0.05)
        with CACHE_LOCK:
            time.sleep(0.001)


def work(index: int) -> float:
    with CACHE_LOCK:  # the copy in a forked child is held by a thread the child does not have
        return float(index)


class FeatureCache:
    def get(self, index: int) -> float:
        with CACHE_LOCK:
            return float(index)


def _children_wait() -> bool:
    import psutil

    children = psutil.Process().children()
    # a Pool also starts no helper process; a DataLoader's workers are its only children
    return len(children) >= WORKERS and all(_common.sleeping_steadily(c.pid) for c in children)


def _children() -> dict:
    import psutil

    return {"children": sorted(c.pid for c in psutil.Process().children())}


def dataloader(read=work) -> None:
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Shards(Dataset):
        def __len__(self) -> int:
            return 1000

        def __getitem__(self, index: int):
            return torch.tensor([read(index)])

    loader = iter(DataLoader(Shards(), batch_size=4, num_workers=WORKERS, multiprocessing_context="fork"))
    FORKED.set()
    _common.ready_when(_children_wait, _children)
    for step, batch in enumerate(loader):
        print(f"step {step} loss {float(batch.sum()):.3f}", flush=True)


def pool() -> None:
    with multiprocessing.get_context("fork").Pool(WORKERS) as workers:
        FORKED.set()
        _common.ready_when(_children_wait, _children)
        print(sum(workers.map(work, range(64))), flush=True)


if __name__ == "__main__":
    threading.Thread(target=refresh_cache, name="cache-refresh", daemon=True).start()
    HELD.wait()
    scenarios = {"dataloader": dataloader, "dataloader_get": lambda: dataloader(FeatureCache().get), "pool": pool}
    scenarios[sys.argv[1] if len(sys.argv) > 1 else "dataloader"]()
    _common.sleep_forever()
