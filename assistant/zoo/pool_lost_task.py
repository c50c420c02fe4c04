"""Hang: ``multiprocessing.Pool.map`` after one pool worker was SIGKILLed: the map never returns.

``python pool_lost_task.py``. A preprocessing step featurizes two shards with ``Pool(2).map`` (fork
context, ``chunksize=1``): shard 0 is large (minutes of CPU), shard 1 small. Each task writes
``<workdir>/task-<i>`` (``{"pid": worker, "shard": i}``) when it starts and ``done-<i>`` when it ends.
READY (``{"pid": parent, "busy_worker": pid on shard 0}``) is written once both tasks have started.

The test then SIGKILLs the worker on shard 0 (as the OOM killer, or a person, would). The pool
notices the dead worker, reaps it and starts a replacement, but the task it held is lost: its
result never comes, and the parent waits in ``Pool.map`` -> ``ApplyResult.wait`` for ever while
every live worker idles in ``get`` for a task that never comes.
"""

from __future__ import annotations

import multiprocessing
import os
import time

import _common

SHARD_SECONDS = (600.0, 0.2)


def featurize(shard: int) -> float:
    _common.write_marker(f"task-{shard}", shard=shard)
    total, started = 0.0, time.monotonic()
    while time.monotonic() - started < SHARD_SECONDS[shard]:
        total += sum(i * i for i in range(1000)) % 7
    _common.write_marker(f"done-{shard}", shard=shard)
    return total


def main() -> None:
    def both_started() -> bool:
        return all(_common.read_marker(f"task-{i}") for i in range(len(SHARD_SECONDS)))

    _common.ready_when(both_started, lambda: {"busy_worker": _common.read_marker("task-0")["pid"]})
    with multiprocessing.get_context("fork").Pool(2) as pool:
        features = pool.map(featurize, range(len(SHARD_SECONDS)), chunksize=1)
    print(f"features: {features}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
