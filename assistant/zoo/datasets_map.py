"""Hang: ``datasets.Dataset.map(num_proc=2)`` whose worker blocks on one example's file.

``python datasets_map.py``. The job builds a dataset of file paths and loads each file in a
``map`` with two processes, as preprocessing scripts do. One example's file is a FIFO that no
process writes (a file streamed by a fetcher that never started): the pool worker that takes it
blocks in ``open()``, and the main process polls ``iflatmap_unordered``'s Manager queue
(``queue.get(timeout=0.05)``, datasets/utils/py_utils.py) for ever.

READY (``{"pid", "worker_pid", "fifo"}``): once a worker has sat in the FIFO's open for 5
consecutive samples.
"""

from __future__ import annotations

import _common
from datasets import Dataset


def load(example: dict) -> dict:
    with open(example["path"], "rb") as f:
        example["size"] = len(f.read())
    return example


def main() -> None:
    paths = _common.shard_files("example", 8, fifo_at=5)
    fifo = paths[5]

    _common.ready_when(
        lambda: _common.child_blocked_in_open() is not None,
        lambda: {"worker_pid": _common.child_blocked_in_open(), "fifo": fifo},
    )
    print("mapping with 2 processes", flush=True)
    loaded = Dataset.from_dict({"path": paths}).map(load, num_proc=2)
    print(f"loaded {sum(loaded['size'])} bytes", flush=True)


if __name__ == "__main__":
    main()
