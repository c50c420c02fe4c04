"""Hang: a notify sent before the uploader thread waits is lost; the trainer waits, rightly, on the
state the uploader would clear (cause ``thread-deadlock``).

``python lost_notify_uploader.py``. The trainer sets ``ckpt_ready`` and calls ``cv.notify()``, and only then
starts the uploader, whose loop calls ``cv.wait()`` with no predicate; the trainer then waits with
``while ckpt_ready: cv.wait()`` for the uploader to clear it (the eleventh hunt's j03: the trainer's
wait was blamed, and the fix was for a pool thread's Event).

READY (``{"pid", "uploader", "bare_wait_line"}``): once both threads have slept for 5 consecutive samples.
"""

from __future__ import annotations

import inspect
import os
import threading

import _common

cv = threading.Condition()
state = {"ckpt_ready": False}


def upload_checkpoints() -> None:
    while True:
        with cv:
            cv.wait()  # the bug: no predicate, so a notify sent before this wait is lost
            state["ckpt_ready"] = False
            cv.notify_all()


def main() -> None:
    with cv:
        state["ckpt_ready"] = True
        cv.notify()  # nobody waits yet
    uploader = threading.Thread(target=upload_checkpoints, name="ckpt-uploader", daemon=True)
    uploader.start()
    source, first = inspect.getsourcelines(upload_checkpoints)
    bare = first + next(i for i, line in enumerate(source) if line.strip().startswith("cv.wait()"))
    _common.ready_when(
        lambda: (
            _common.sleeping_steadily(os.getpid(), threading.main_thread().native_id)
            and _common.sleeping_steadily(os.getpid(), uploader.native_id)
        ),
        lambda: {"uploader": uploader.native_id, "bare_wait_line": bare},
    )
    with cv:
        while state["ckpt_ready"]:
            cv.wait()  # waits on the state: right, but the uploader never clears it
    print("checkpoint uploaded", flush=True)


if __name__ == "__main__":
    main()
