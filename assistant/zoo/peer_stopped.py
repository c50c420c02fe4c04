"""Hang: a process the trainer relies on is stopped (SIGSTOP: a job-control slip, a debugger, a pause
script), so the trainer waits for it for ever; one scenario per argument (``peer_stopped.py <scenario>``).
Here the job stops that process itself after it starts, standing in for the outside event.

- ``manager``: the trainer shares its metrics through a ``multiprocessing.Manager`` dict; the next
  proxy call waits for its answer in ``Connection._recv`` (a read of the unix socket to the manager's
  server process, in state T).
- ``child``: each epoch's shard is prepared by a preprocessing child (``subprocess.Popen``, then
  ``wait()``, as ``subprocess.run`` does); the child is stopped, the trainer waits for it in ``wait4``.

READY (``{"pid", "scenario", "stopped_pid"}``) once the main thread has slept in its wait for a few
samples.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading

import _common

PREPARE = "import time\nwhile True:\n    sum(i * i for i in range(10000))\n    time.sleep(0.05)\n"


def ready_once_waiting(function: str, stopped: dict) -> None:
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: (
            "pid" in stopped
            and function in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        ),
        lambda: {"scenario": sys.argv[1], "stopped_pid": stopped["pid"]},
    )


def manager() -> None:
    stats = multiprocessing.Manager()
    shared = stats.dict()
    stopped = {"pid": stats._process.pid}
    ready_once_waiting("_recv", stopped)
    for step in range(10**6):
        if step == 20:
            os.kill(stopped["pid"], signal.SIGSTOP)
        shared["step"] = step  # a proxy call: the manager answers it, or nothing does


def child() -> None:
    stopped: dict = {}
    ready_once_waiting("_try_wait", stopped)
    prep = subprocess.Popen([sys.executable, "-I", "-c", PREPARE])  # the shard's preparation
    os.kill(prep.pid, signal.SIGSTOP)
    stopped["pid"] = prep.pid
    prep.wait()


if __name__ == "__main__":
    _common.run_scenario({"manager": manager, "child": child})
