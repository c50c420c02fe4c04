"""Hang: a launcher starts two preprocessing workers and a dashboard (``python -m http.server``), then
reaps children with ``os.wait()`` until none is left (the thirteenth hunt's j16: the dashboard was
blamed as "waiting for a connection that never comes", external-service)::

    dashboard = subprocess.Popen([sys.executable, "-I", "-m", "http.server", "0", "--bind", "127.0.0.1"])
    workers = [subprocess.Popen([sys.executable, "-I", "-c", WORK]) for _ in range(2)]
    while True:
        pid, status = os.wait()           # the dashboard never exits

READY (``{"pid", "dashboard"}``): once both workers have been reaped and the main thread has slept
for 5 consecutive samples.
"""

from __future__ import annotations

import os
import subprocess
import sys

import _common

WORK = "import time; time.sleep(0.5)"


def main() -> None:
    dashboard = subprocess.Popen(
        [sys.executable, "-I", "-m", "http.server", "0", "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers = {subprocess.Popen([sys.executable, "-I", "-c", WORK]).pid for _ in range(2)}
    reaped: set = set()
    _common.ready_when(
        lambda: workers <= reaped and _common.sleeping_steadily(os.getpid()), lambda: {"dashboard": dashboard.pid}
    )
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        reaped.add(pid)
        print(f"child {pid} exited with {status}", flush=True)
    print("all children done", flush=True)


if __name__ == "__main__":
    main()
