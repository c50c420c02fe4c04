"""Hang: the job waits for a cache lock that another live process holds (filelock, as HF libraries use).

``python lock_held_elsewhere.py``. A cache-filling process (a child here, started first, standing
in for a second job on the same cache whose download is stuck) takes
``filelock.FileLock("<workdir>/cache/model.safetensors.lock")`` and never lets go. The job then loads
the weights under the same lock, with no timeout: filelock's ``acquire`` tries a non-blocking
``flock`` and sleeps between tries, for ever. The lock is not stale: its holder is alive, and
removing the file would not release an ``flock``.

READY (``{"pid", "holder_pid", "lock_path"}``): once the holder has the lock and the job has slept
in ``acquire`` for 5 consecutive samples.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import _common
from filelock import FileLock

HOLDER = r"""
import sys, time
from filelock import FileLock
with FileLock(sys.argv[1]):
    print("locked", flush=True)
    while True:
        time.sleep(3600)  # a download that never finishes
"""


def main() -> None:
    cache = _common.workdir() / "cache"
    cache.mkdir(exist_ok=True)
    lock_path = str(cache / "model.safetensors.lock")
    holder = subprocess.Popen([sys.executable, "-I", "-c", HOLDER, lock_path], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    main_thread = threading.main_thread()

    def waiting() -> bool:
        in_acquire = "acquire" in _common.stack_functions(main_thread.ident)
        return in_acquire and _common.sleeping_steadily(os.getpid(), main_thread.native_id)

    _common.ready_when(waiting, lambda: {"holder_pid": holder.pid, "lock_path": lock_path})
    print("loading model weights", flush=True)
    with FileLock(lock_path):  # no timeout: the bug
        print("weights loaded", flush=True)


if __name__ == "__main__":
    main()
