"""Hang: the main thread waits on ``future.result()`` for a task that never finishes (``thread-deadlock``).

A ``ThreadPoolExecutor(max_workers=1)`` runs ``prefetch_shard``, which waits on a
``threading.Event`` nobody sets; the main thread calls ``future.result()`` with no timeout.
~0% CPU, every thread idle.

py-spy::

    Thread (idle): "MainThread"
        Condition.wait (threading.py)
        Future.result (concurrent/futures/_base.py)
        main (future_result.py)
        <module> (future_result.py)
    Thread (idle): "loader_0"
        Condition.wait (threading.py)
        Event.wait (threading.py)
        prefetch_shard (future_result.py)
        _WorkItem.run (concurrent/futures/thread.py)
        _worker (concurrent/futures/thread.py)
        Thread.run (threading.py) ...

READY (``{"pid"}``): written by the task itself, just before it blocks on the event, once the
main thread's stack shows ``result`` -> ``wait``.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import _common

never_set = threading.Event()


def prefetch_shard(main_ident: int) -> int:
    def main_waits() -> bool:
        names = _common.stack_functions(main_ident)
        return "result" in names and names[0] == "wait"

    if _common.wait_until(main_waits, timeout=60):
        _common.mark_ready()
    never_set.wait()
    return 0


def main() -> None:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="loader") as pool:
        future = pool.submit(prefetch_shard, threading.get_ident())
        print("waiting for the prefetch", flush=True)
        print(future.result())


if __name__ == "__main__":
    main()
