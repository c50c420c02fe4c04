"""Hang: the main thread holds a cache's FileLock while it waits for download threads that take the
same lock file (``python filelock_own_thread.py``).

``with FileLock(cache/.lock):`` around a ``ThreadPoolExecutor(2)`` whose tasks each write one shard
under ``with FileLock(cache/.lock):``. filelock's lock is a flock on an open file: each task opens
the file again, fails ``LOCK_NB`` and polls (``time.sleep(poll_interval)``); the main thread waits in
``ex.map`` for them. /proc/locks names the job's own pid as the holder (the twelfth hunt's j25: read
as a stale lock file "no process has open", the first fix ``rm`` of the file).

READY (``{"pid"}``) once both pool threads have polled for a few samples and the main thread sleeps.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import _common
from filelock import FileLock

CACHE = _common.workdir() / "cache"


def download(name: str) -> str:
    with FileLock(f"{CACHE}/.lock"):
        (CACHE / name).write_bytes(os.urandom(1024))
    return name


def ready_once_polling() -> None:
    main = threading.main_thread()

    def polling() -> bool:
        pollers = [t for t in threading.enumerate() if t.name.startswith("dl")]
        in_acquire = all("_poll_until_acquired" in _common.stack_functions(t.ident) for t in pollers)
        return len(pollers) == 2 and in_acquire and _common.sleeping_steadily(os.getpid(), main.native_id)

    _common.ready_when(polling)


if __name__ == "__main__":
    CACHE.mkdir(parents=True, exist_ok=True)
    print("populating the cache", flush=True)
    with FileLock(f"{CACHE}/.lock"):
        with ThreadPoolExecutor(2, thread_name_prefix="dl") as ex:
            ready_once_polling()
            for name in ex.map(download, [f"shard-{i}.bin" for i in range(4)]):
                print("cached", name, flush=True)
    print("cache ready", flush=True)
