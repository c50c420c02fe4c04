"""Hang: the main process installs a SIGCHLD handler that reaps any child with os.waitpid(-1, WNOHANG)
(meant for fire-and-forget helpers), then starts an index builder as a multiprocessing.Process and
waits with ``while builder.is_alive()``. The builder exits 0 within a second; the handler takes its
status first, multiprocessing's poll gets ECHILD and returns None, and is_alive() stays True for ever
(the fifteenth hunt's j15: no cause named, "Compile in-process" as the second fix)::

    signal.signal(signal.SIGCHLD, reap_children)
    builder = mp.Process(target=build_index, ...); builder.start()
    while builder.is_alive():
        time.sleep(0.5)

READY (``{"pid", "builder_pid"}``) once the builder is gone and the loop has gone round again.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import _common


def reap_children(signum, frame):
    while True:  # reap the helpers' zombies
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def build_index(path: str) -> None:
    with open(path, "w") as out:
        out.write("index\n")


if __name__ == "__main__":
    signal.signal(signal.SIGCHLD, reap_children)
    builder = mp.get_context("fork").Process(target=build_index, args=(str(_common.workdir() / "index.txt"),))
    builder.start()
    rounds = []
    _common.ready_when(
        lambda: not os.path.exists(f"/proc/{builder.pid}") and len(rounds) > 2,
        lambda: {"pid": os.getpid(), "builder_pid": builder.pid},
    )
    t0 = time.time()
    while builder.is_alive():
        time.sleep(0.5)
        rounds.append(1)
        if len(rounds) % 4 == 0:
            _common.log(f"waiting for the index builder ({time.time() - t0:.0f}s)")
    _common.log(f"index built (exit code {builder.exitcode})")
