"""Hang: a ``ProcessPoolExecutor`` map whose worker blocks on one shard that never delivers.

``python process_pool_shard.py``. The job loads its shards in worker processes::

    with ProcessPoolExecutor(2) as pool:
        sizes = list(pool.map(load, shards))      # no timeout

The third shard is a FIFO that no process writes: the worker that takes it blocks in ``open()``,
and the main thread waits in ``Future.result`` for ever (the executor's feeder and manager threads
idle beside it).

READY (``{"pid", "worker_pid", "fifo"}``): once a worker has sat in the FIFO's open for 5
consecutive samples.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import _common


def load(path: str) -> int:
    with open(path, "rb") as f:
        return len(f.read())


def main() -> None:
    shards = _common.shard_files("shard", 4, fifo_at=2)
    _common.ready_when(
        lambda: _common.child_blocked_in_open() is not None,
        lambda: {"worker_pid": _common.child_blocked_in_open(), "fifo": shards[2]},
    )
    print("loading shards", flush=True)
    with ProcessPoolExecutor(2) as pool:
        sizes = list(pool.map(load, shards))  # no timeout: the bug
    print(f"loaded {sum(sizes)} bytes", flush=True)


if __name__ == "__main__":
    main()
