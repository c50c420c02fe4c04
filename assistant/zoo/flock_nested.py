"""Hang: a checkpoint save takes an ``flock`` on the run's lock file and, still holding it, updates
the checkpoint index, which takes the same lock through another ``open()`` of the file (the
thirteenth hunt's j25, called checkpoint-save 91% with "stop and resume" as the fix)::

    @contextmanager
    def locked(path):
        with open(path, "a") as f:   # a new open file each time
            fcntl.flock(f, fcntl.LOCK_EX)
            yield

    def save_checkpoint(step):
        with locked(LOCK):
            ...
            update_index(step)       # with locked(LOCK) again: blocks for ever

A flock belongs to the open file, so the second open is another owner (flock(2)); /proc/locks names
this process as the holder.

READY (``{"pid"}``): once the main thread has slept in ``locked`` for 5 consecutive samples.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from contextlib import contextmanager

import _common

LOCK = str(_common.workdir() / "run.lock")
INDEX = _common.workdir() / "index.json"


@contextmanager
def locked(path: str):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def update_index(step: int, path: str) -> None:
    with locked(LOCK):
        index = json.loads(INDEX.read_text()) if INDEX.exists() else {}
        index[str(step)] = path
        INDEX.write_text(json.dumps(index))


def save_checkpoint(step: int) -> None:
    with locked(LOCK):
        path = _common.workdir() / f"ckpt_{step}.bin"
        path.write_bytes(os.urandom(1024))
        update_index(step, str(path))


def main() -> None:
    main_thread = threading.main_thread()

    def stuck() -> bool:
        in_lock = "locked" in _common.stack_functions(main_thread.ident)
        return in_lock and _common.sleeping_steadily(os.getpid(), main_thread.native_id)

    _common.ready_when(stuck)
    for step in range(1, 100):
        print(f"step {step} loss 0.5", flush=True)
        if step % 5 == 0:
            save_checkpoint(step)


if __name__ == "__main__":
    main()
