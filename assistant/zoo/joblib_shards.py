"""Hang: a joblib preprocessing step whose loky worker is blocked on one shard that never delivers.

``python joblib_shards.py``. The job tokenizes its shards in parallel the way many preprocessing
scripts do::

    sizes = Parallel(n_jobs=2)(delayed(tokenize)(path) for path in shards)

The last shard is a FIFO that no process writes (a shard streamed by a fetcher that never started):
the loky worker that takes it blocks in ``open()``, and ``Parallel`` polls for its result for ever
(joblib's ``_retrieve`` sleeps 0.01 s between looks; no ``timeout`` was given).

READY (``{"pid", "worker_pid", "fifo"}``): once a worker has sat in the FIFO's open for 5
consecutive samples.
"""

from __future__ import annotations

import _common
from joblib import Parallel, delayed


def tokenize(path: str) -> int:
    with open(path, "rb") as f:
        return len(f.read().split())


def main() -> None:
    shards = _common.shard_files("shard", 4, fifo_at=3, content=b"tokens " * 100)
    fifo = shards[3]

    _common.ready_when(
        lambda: _common.child_blocked_in_open() is not None,
        lambda: {"worker_pid": _common.child_blocked_in_open(), "fifo": fifo},
    )
    print(f"tokenizing {len(shards)} shards with joblib", flush=True)
    sizes = Parallel(n_jobs=2)(delayed(tokenize)(path) for path in shards)
    print(f"tokens: {sum(sizes)}", flush=True)


if __name__ == "__main__":
    main()
