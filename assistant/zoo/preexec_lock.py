"""Hang: a trainer that runs a config-reloader thread starts a helper command with
``subprocess.Popen(..., preexec_fn=set_limits)``, and ``set_limits`` reads the config under the lock
the reloader holds while it reloads (the fourteenth hunt's j07: io-stall, "Put the data on a local
SSD"). The forked child has only the thread that forked: the lock stays held there for ever, and the
parent waits in Popen for the child's exec::

    def set_limits():               # runs in the child, after fork, before exec
        with cfg_lock:
            n = cfg["nofile"]

READY (``{"pid", "child_pid"}``) once the forked child's thread has slept for a few samples.
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time

import _common

cfg_lock = threading.Lock()
cfg = {"nofile": 4096}
reloading = threading.Event()


def reloader() -> None:
    with cfg_lock:
        reloading.set()
        time.sleep(3600)  # re-reads the config from a slow mount, holding the lock
        cfg["nofile"] = 4096


def set_limits() -> None:
    with cfg_lock:
        n = cfg["nofile"]
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def child_pid() -> int | None:
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children", encoding="ascii") as f:
        found = f.read().split()
    return int(found[0]) if found else None


if __name__ == "__main__":
    threading.Thread(target=reloader, daemon=True, name="cfg-reloader").start()
    reloading.wait()
    _common.ready_when(
        lambda: child_pid() is not None and _common.sleeping_steadily(child_pid()),
        lambda: {"pid": os.getpid(), "child_pid": child_pid()},
    )
    print("epoch 0 done, running the eval helper", flush=True)
    subprocess.Popen(["sleep", "0.2"], preexec_fn=set_limits).wait()
