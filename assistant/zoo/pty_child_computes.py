"""Healthy: the trainer runs its evaluator under a pseudo-terminal (so that the child's progress bar
draws as on a terminal) and reads the pty master; the evaluator computes for half a minute between
updates (``torch.linalg.solve`` in a loop). The read's other end, the pty slave, is named by no /proc
link, so the chain stopped at "a read of the device /dev/ptmx": HUNG, cpu-spin (the seventeenth
hunt's h03; an inotify watcher beside a training child, its h04, read the same way)::

    master, slave = os.openpty()
    evaluator = subprocess.Popen(cmd, stdout=slave, stderr=slave)
    os.read(master, 4096)

READY (``{"pid", "child_pid"}``) once the trainer sleeps in its read and the child computes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import _common

EVALUATOR = """
import time, torch
torch.set_num_threads(1)
system = torch.randn(400, 400) + 400 * torch.eye(400)
for trial in range(100):
    started = time.monotonic()
    while time.monotonic() - started < 30.0:
        torch.linalg.solve(system, torch.randn(400))
    print(f"trial {trial} done", flush=True)
"""

if __name__ == "__main__":
    master, slave = os.openpty()
    evaluator = subprocess.Popen([sys.executable, "-I", "-c", EVALUATOR], stdout=slave, stderr=slave)
    os.close(slave)
    _common.ready_when(
        lambda: _common.sleeping_steadily(os.getpid()) and _common.task_state(evaluator.pid) == "R",
        lambda: {"pid": os.getpid(), "child_pid": evaluator.pid},
    )
    while True:
        _common.log(os.read(master, 4096).decode(errors="replace").strip())
