"""Hang: the job waits for a cache lock that another live process holds (filelock, as HF libraries use).

``python lock_held_elsewhere.py``. A cache-filling process (a child here, started first, standing
in for a second job on the same cache whose download is stuck) takes
``filelock.FileLock("<workdir>/cache/model.safetensors.lock")`` and never lets go. The job then loads
the weights under the same lock, with no timeout: filelock's ``acquire`` tries a non-blocking
``flock`` and sleeps between tries, for ever. The lock is not stale: its holder is alive, and
removing the file would not release an ``flock``.

READY (``{"pid", "holder_pid", "lock_path"}``): once the holder has the lock and the job has slept
in ``acquire`` for 5 consecutive samples.

``python lock_held_elsewhere.py writing``: not hung. The holder is another process on the machine,
not of this job (started through a launcher that exits at once, so it is no descendant; it stays
in the job's process group, which the zoo stops), and it downloads into the cache while it holds
the lock: 64 KiB every 50 ms to ``model.safetensors.incomplete``. The job waits its turn.

``python lock_held_elsewhere.py outside``: hung. The holder is such a process outside the job (a
leftover run of another session), started the same way, and it sleeps holding the lock.
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

WRITING_HOLDER = r"""
import os, sys, time
from filelock import FileLock
with FileLock(sys.argv[1]):
    with open(sys.argv[2], "w") as marker:
        marker.write(str(os.getpid()))
    with open(sys.argv[1][: -len(".lock")] + ".incomplete", "wb") as f:
        while True:  # a download in progress
            f.write(b"x" * (64 << 10))
            f.flush()
            time.sleep(0.05)
"""
SLEEPING_HOLDER = r"""
import os, sys, time
from filelock import FileLock
with FileLock(sys.argv[1]):
    with open(sys.argv[2], "w") as marker:
        marker.write(str(os.getpid()))
    while True:
        time.sleep(3600)  # a leftover run, stuck with the lock
"""
# starts the holder and exits at once: the holder is reparented, no descendant of the job
LAUNCHER = r"""
import subprocess, sys
subprocess.Popen([sys.executable, "-I", "-c", sys.argv[1], *sys.argv[2:]])
"""
SCENARIO = sys.argv[1] if len(sys.argv) > 1 else "stuck"


def start_holder(lock_path: str) -> int:
    if SCENARIO in ("writing", "outside"):
        marker = _common.workdir() / "holder.pid"
        program = WRITING_HOLDER if SCENARIO == "writing" else SLEEPING_HOLDER
        subprocess.run([sys.executable, "-I", "-c", LAUNCHER, program, lock_path, str(marker)], check=True)
        _common.wait_until(lambda: marker.exists() and marker.read_text().strip().isdigit(), timeout=60)
        return int(marker.read_text())
    holder = subprocess.Popen([sys.executable, "-I", "-c", HOLDER, lock_path], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder.pid


def main() -> None:
    cache = _common.workdir() / "cache"
    cache.mkdir(exist_ok=True)
    lock_path = str(cache / "model.safetensors.lock")
    holder_pid = start_holder(lock_path)
    main_thread = threading.main_thread()

    def waiting() -> bool:
        in_acquire = "acquire" in _common.stack_functions(main_thread.ident)
        return in_acquire and _common.sleeping_steadily(os.getpid(), main_thread.native_id)

    _common.ready_when(waiting, lambda: {"holder_pid": holder_pid, "lock_path": lock_path})
    print("loading model weights", flush=True)
    with FileLock(lock_path):  # no timeout: the bug
        print("weights loaded", flush=True)


if __name__ == "__main__":
    main()
