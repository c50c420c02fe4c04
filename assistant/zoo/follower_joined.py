"""Hang (at exit): a thread follows the job's metrics file through ``tail -F`` and the main thread
joins it when training is done; ``tail -F`` never ends, so the thread never sees end-of-file (the
fourteenth hunt's j18: the tail process named, "put a timeout on every wait" as the fix)::

    tail = subprocess.Popen(["tail", "-F", "-n", "0", path], stdout=subprocess.PIPE, text=True)
    def follow():
        for line in tail.stdout: ...
    ...
    follower.join()

READY (``{"pid", "tail_pid"}``) once the main thread has slept in ``join`` for a few samples.
"""

from __future__ import annotations

import os
import subprocess
import threading

import _common

if __name__ == "__main__":
    path = os.path.join(_common.workdir(), "metrics.csv")
    open(path, "w").close()
    tail = subprocess.Popen(["tail", "-F", "-n", "0", path], stdout=subprocess.PIPE, text=True)
    seen: list = []

    def follow() -> None:
        for line in tail.stdout:
            seen.append(line)

    follower = threading.Thread(target=follow, name="metrics-follower")
    follower.start()
    with open(path, "a") as metrics:
        for step in range(5):
            metrics.write(f"{step},0.5\n")
            metrics.flush()
    print("training done; waiting for the follower", flush=True)
    _common.ready_when(_common._main_sleeps_in("join"), lambda: {"pid": os.getpid(), "tail_pid": tail.pid})
    follower.join()
