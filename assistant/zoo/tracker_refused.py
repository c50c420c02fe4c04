"""Hang: a metrics logger that retries a refused connection for ever (``python tracker_refused.py``).

After a few steps the job reports its metrics to a tracking server that is down (nothing listens at
its port): each try fails with ``ConnectionRefusedError: [Errno 111] Connection refused``, the job
logs a warning, sleeps 2 s and tries again, and never trains again (the fourteenth hunt's j13,
called progressing: the warnings grew the log).

READY (``{"pid"}``) once the main thread has slept in ``report_metrics`` for a few samples and the
log holds two warnings.
"""

from __future__ import annotations

import logging
import os
import socket
import time

import _common


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


TRACKER = ("127.0.0.1", free_port())  # the server that is down: nothing listens here
tries = 0


def report_metrics(step: int, loss: float) -> None:
    global tries
    while True:
        try:
            with socket.create_connection(TRACKER, timeout=5) as conn:
                conn.sendall(f"step={step} loss={loss:.4f}\n".encode())
                return
        except OSError as exc:
            tries += 1
            logging.warning("tracking server %s:%d unreachable (%s), retry %d in 2s", *TRACKER, exc, tries)
            time.sleep(2)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    loss = 2.0
    for step in range(5):
        loss *= 0.9
        logging.info("step %d loss %.4f", step, loss)
    _common.ready_when(lambda: tries >= 2 and _common._main_sleeps_in("report_metrics")(), lambda: {"pid": os.getpid()})
    report_metrics(5, loss)
    logging.info("training resumed")
