"""Hang: children forked while another thread of the parent held a lock they then take.

``python fork_held_lock.py {dataloader|dataloader_get|pool|inside_with}``. A background thread
(``cache-refresh``) takes a ``threading.Lock`` now and then to refresh a cache. The main thread forks children while the
thread holds it: torch DataLoader workers (``dataloader``, the default start method on Linux) or a
``multiprocessing`` fork Pool (``pool``). Each child's ``work`` takes the same lock
(``dataloader_get``: a feature cache's own ``get`` method does, a name queues use too). fork copies
the lock held and only the forking thread, so in every child the lock has no holder and ``work``
waits for ever; the parent waits for batches (or for ``Pool.map``'s results).

To make the fork land inside the critical section every time, the refresher holds the lock from
before the children start until they exist, then goes on refreshing in short holds.

``inside_with``: no other thread; the main thread itself starts a ``multiprocessing`` fork Process
(a shard writer) inside ``with CACHE_LOCK:``, and the writer takes ``CACHE_LOCK`` to read the cache. The
child's copy of the lock is held by the frame that forked it, still on the child's stack below
``_bootstrap``: a lock no code of the child will release (the tenth hunt's j14, whose fix was an RLock).
READY adds ``start_line`` and ``take_line``.

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


def _children_wait(count: int = WORKERS) -> bool:
    import psutil

    children = psutil.Process().children()
    # a Pool also starts no helper process; a DataLoader's workers are its only children
    return len(children) >= count and all(_common.sleeping_steadily(c.pid) for c in children)


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


def write_shard(index: int) -> None:
    with CACHE_LOCK:  # held in this copy by the parent's frame that forked it
        print(f"shard {index} written", flush=True)


def inside_with() -> None:
    import inspect

    context = multiprocessing.get_context("fork")
    with CACHE_LOCK:
        writer = context.Process(target=write_shard, args=(0,), name="shard-writer")
        writer.start()  # the bug: forks while this thread holds CACHE_LOCK

    def lines() -> dict:
        source, first = inspect.getsourcelines(inside_with)
        start = first + next(i for i, line in enumerate(source) if "writer.start()" in line)
        source, first = inspect.getsourcelines(write_shard)
        take = first + next(i for i, line in enumerate(source) if "with CACHE_LOCK" in line)
        return {**_children(), "start_line": start, "take_line": take}

    _common.ready_when(lambda: _children_wait(count=1), lines)
    writer.join()


def pool() -> None:
    with multiprocessing.get_context("fork").Pool(WORKERS) as workers:
        FORKED.set()
        _common.ready_when(_children_wait, _children)
        print(sum(workers.map(work, range(64))), flush=True)


if __name__ == "__main__":
    scenario = sys.argv[1] if len(sys.argv) > 1 else "dataloader"
    if scenario != "inside_with":
        threading.Thread(target=refresh_cache, name="cache-refresh", daemon=True).start()
        HELD.wait()
    scenarios = {
        "dataloader": dataloader,
        "dataloader_get": lambda: dataloader(FeatureCache().get),
        "pool": pool,
        "inside_with": inside_with,
    }
    scenarios[scenario]()
    _common.sleep_forever()
