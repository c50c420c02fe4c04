"""Hang: the trainer starts a non-daemon multiprocessing worker that takes augmentation tasks from a
queue, and is then killed (SIGKILL, as the OOM killer does). The worker, re-parented to init or a
subreaper, waits in ``tasks.get()`` for ever (the sixteenth hunt's j21: "waits for an item from a
queue", with a generic timeout fix)::

    worker = mp.Process(target=aug_worker, args=(tasks,)); worker.start()
    ...
    os.kill(os.getpid(), signal.SIGKILL)      # the trainer dies

``python orphan_worker.py``: a supervisor (the job's root, which stays) runs the trainer as a child.
READY (``{"pid": worker}``) once the worker is an orphan and sleeps in its get.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys

import _common


def aug_worker(tasks) -> None:
    parent = os.getppid()
    me = os.getpid()
    _common.ready_when(lambda: os.getppid() != parent and _common.sleeping_steadily(me), lambda: {"pid": me})
    while True:
        task = tasks.get()  # no timeout: nothing puts once the trainer is gone
        _common.log(f"augmented {task}")


def trainer() -> None:
    tasks = mp.get_context("fork").Queue()
    worker = mp.get_context("fork").Process(target=aug_worker, args=(tasks,), name="aug-0")
    worker.start()
    for step in range(3):
        tasks.put(step)
    _common.log(f"Killed (OOM) trainer pid {os.getpid()}")
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    if sys.argv[1:] == ["trainer"]:
        trainer()
    else:  # the supervisor: the job's root, still there after its trainer died
        subprocess.run([sys.executable, __file__, "trainer"])
        _common.sleep_forever()
