"""Hang: an evaluation logger child opens a write transaction on the run's SQLite database and then
idles in its own loop without committing; the trainer's next insert waits in SQLite's busy handler
(a timeout of a day) for the lock (cause ``io-stall``, a locked file).

``python sqlite_idle_holder.py``. The eleventh hunt's j09: the trainer sleeps inside sqlite3's busy
handler (native ``usleep`` under ``libsqlite3``), at a line of its own ``for`` loop; that was read as
the job's own loop sleeping between inputs ("undecided"), and the first fix was "put the data on a
local SSD".

READY (``{"pid", "holder_pid", "path"}``): once the trainer has slept for 10 consecutive samples.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time

import _common


def eval_logger(db: str) -> None:
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")  # a write transaction...
    con.execute("INSERT INTO metrics VALUES (?, ?, ?)", (0, "eval_acc", 0.1))
    while True:  # ...held while it waits for evaluation requests, never committed
        time.sleep(1)


def main() -> None:
    db = str(_common.workdir() / "runs.db")
    con = sqlite3.connect(db, timeout=86400)
    con.execute("CREATE TABLE metrics (step INT, name TEXT, value REAL)")
    con.commit()
    holder = multiprocessing.get_context("fork").Process(target=eval_logger, args=(db,), name="eval-logger")
    holder.start()
    time.sleep(0.5)  # the logger has its transaction open
    _common.ready_when(
        lambda: _common.sleeping_steadily(os.getpid(), samples=10),
        lambda: {"holder_pid": holder.pid, "path": db},
    )
    for step in range(1, 100000):
        loss = 1.0 / step
        if step % 10 == 0:
            print(f"step {step} loss {loss:.4f}", flush=True)
            con.execute("INSERT INTO metrics VALUES (?, ?, ?)", (step, "loss", loss))
            con.commit()
        time.sleep(0.01)


if __name__ == "__main__":
    main()
