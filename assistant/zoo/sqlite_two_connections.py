"""Hang: two SQLite connections of one process, the first with an open write transaction
(``python sqlite_two_connections.py``; the fifteenth hunt's j01).

The metrics logger inserts each step through its connection and commits every 10 steps; at step 25
a summary helper opens a second connection to the same database and writes through it, with
``timeout=3600``. The first connection's uncommitted insert holds the write lock, so the second
waits in SQLite's busy handler for an hour, in the same thread that would commit. It was read as
slow storage ("put the data on a local SSD"), the lock unnamed.

READY (``{"pid", "path"}``) once the main thread has slept in ``update_summary`` for a few samples.
"""

from __future__ import annotations

import os
import sqlite3

import _common


def update_summary(db: str, step: int, loss: float) -> None:
    with sqlite3.connect(db, timeout=3600) as other:
        other.execute("insert or replace into summary values (?, ?)", ("last_step", str(step)))
        other.execute("insert or replace into summary values (?, ?)", ("last_loss", f"{loss:.4f}"))


if __name__ == "__main__":
    db = str(_common.workdir() / "metrics.sqlite")
    conn = sqlite3.connect(db, timeout=3600)
    conn.execute("create table if not exists metrics(step int, name text, value real)")
    conn.execute("create table if not exists summary(key text primary key, value text)")
    conn.commit()
    _common.ready_when(_common._main_sleeps_in("update_summary"), lambda: {"pid": os.getpid(), "path": db})
    loss = 2.0
    for step in range(1, 1000):
        loss *= 0.99
        conn.execute("insert into metrics values (?, ?, ?)", (step, "loss", loss))
        if step % 25 == 0:
            update_summary(db, step, loss)  # the slip: the insert above is not committed yet
        if step % 10 == 0:
            conn.commit()
        print(f"step {step} loss {loss:.4f}", flush=True)
