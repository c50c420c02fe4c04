"""Hang: every task of a thread pool waits for another task it submitted to the same pool.

``python pool_nested_wait.py``. A prefetcher with two worker threads (``thread_name_prefix=
"prefetch"``) loads two batches at once; each load submits its decode to the same pool and waits::

    def load(i):
        return pool.submit(decode, i).result()   # queued behind the loads: no worker is free

    futures = [pool.submit(load, i) for i in range(2)]
    futures[0].result()

Both workers wait inside ``load`` for futures that no worker will ever start (the deadlock the
``concurrent.futures`` docs show for a ``max_workers=1`` pool, with two).

READY (``{"pid", "pool"}``): once both workers sit in ``Future.result`` inside ``load``.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import _common

pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="prefetch")


def decode(item: int) -> int:
    return item * 2


# Both loads hold a worker before either submits its decode: without it a slow start lets the second
# worker take the first decode, and the job finishes (the deadlock depends on timing, not on the code)
both_loading = threading.Barrier(2)


def load(item: int) -> int:
    both_loading.wait()
    return pool.submit(decode, item).result()


def main() -> None:
    def both_waiting() -> bool:
        frames = sys._current_frames()
        workers = [t for t in threading.enumerate() if t.name.startswith("prefetch_")]
        waiting = [t for t in workers if "load" in _common.stack_functions(t.ident)]
        return len(workers) == 2 and len(waiting) == 2 and all(t.ident in frames for t in waiting)

    _common.ready_when(both_waiting, info=lambda: {"pool": "prefetch"})
    print("step 0: loading 2 batches", flush=True)
    futures = [pool.submit(load, i) for i in range(2)]
    print(futures[0].result(), flush=True)


if __name__ == "__main__":
    main()
