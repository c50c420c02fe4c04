"""Hang: the trainer shares its metrics through a ``multiprocessing.Manager`` dict; the manager's
server process is stopped (SIGSTOP: a job-control slip, a debugger, a pause script), so the next proxy
call waits for ever for its answer (``python manager_stopped.py``).

The trainer's main thread blocks in ``Connection._recv`` (a read of the unix socket to the manager);
the manager process is in state T. Here the job stops its own manager after a few steps, standing
in for the outside event.

READY (``{"pid", "manager_pid"}``) once the main thread has slept in its read for a few samples.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading

import _common


def main() -> None:
    manager = multiprocessing.Manager()
    stats = manager.dict()
    server = manager._process.pid
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: (
            "_recv" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        ),
        lambda: {"manager_pid": server},
    )
    for step in range(10**6):
        if step == 20:
            os.kill(server, signal.SIGSTOP)
        stats["step"] = step  # a proxy call: the manager answers it, or nothing does


if __name__ == "__main__":
    main()
