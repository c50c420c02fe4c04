"""Hang at exit: the trainer's metrics writer is a non-daemon multiprocessing child that reads a queue
until it gets ``None``; training ends without sending it, and at exit multiprocessing joins the child
(its atexit handler), which waits in ``q.get()`` for ever (the sixteenth hunt's j24: "no process or
thread is left to write to the pipe", nothing about the missing sentinel)::

    writer = mp.Process(target=write_metrics, args=(q,)); writer.start()
    ...                                   # training: q.put(metrics) each step
    # the end of the script: no q.put(None), no writer.join()

READY (``{"pid", "child_pid"}``) once the script has returned and the main thread waits at exit.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading

import _common


def write_metrics(q) -> None:
    while True:
        item = q.get()
        if item is None:
            return
        _common.log(f"metrics {item}")


if __name__ == "__main__":
    q = mp.get_context("fork").Queue()
    writer = mp.get_context("fork").Process(target=write_metrics, args=(q,), name="metrics-writer")
    writer.start()
    finished = threading.Event()
    _common.ready_when(
        lambda: finished.is_set() and _common.sleeping_steadily(os.getpid()),
        lambda: {"pid": os.getpid(), "child_pid": writer.pid},
    )
    for step in range(5):
        q.put({"step": step, "loss": 1.0 / (step + 1)})
    _common.log("training done")
    finished.set()  # the script returns here: multiprocessing joins the writer at exit
