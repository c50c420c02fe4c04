"""Hang: a shard-staging child polls for a ``READY`` marker that the trainer writes only after it has
waited for that child (the thirteenth hunt's j06, DataLoader workers polling in worker_init_fn for a
marker written after the first batch, and j09, a rank polling for a file rank 0 writes after a
barrier: "the loop waits for something that never happens", not where the file is made)::

    stager.start()
    stager.join()                      # waits for the child...
    open(READY, "w").close()           # ...which waits for this

READY (``{"pid", "child_pid"}``): once the child sleeps in its poll loop and the trainer in its join.
"""

from __future__ import annotations

import multiprocessing
import os
import time

import _common

MARKER = str(_common.workdir() / "shards.ready")


def stage_shards() -> None:
    while not os.path.exists(MARKER):
        time.sleep(0.2)
    print("shards staged", flush=True)


def main() -> None:
    stager = multiprocessing.get_context("fork").Process(target=stage_shards, name="stager")
    stager.start()
    _common.ready_when(
        lambda: _common.sleeping_steadily(stager.pid) and _common.sleeping_steadily(os.getpid()),
        lambda: {"child_pid": stager.pid},
    )
    stager.join()
    open(MARKER, "w").close()
    print("training", flush=True)


if __name__ == "__main__":
    main()
