"""Hang: ``datasets.Dataset.map(num_proc=2)`` whose worker blocks on one example's file.

``python datasets_map.py``. The job builds a dataset of file paths and loads each file in a
``map`` with two processes, as preprocessing scripts do. One example's file is a FIFO that no
process writes (a file streamed by a fetcher that never started): the pool worker that takes it
blocks in ``open()``, and the main process polls ``iflatmap_unordered``'s Manager queue
(``queue.get(timeout=0.05)``, datasets/utils/py_utils.py) for ever.

READY (``{"pid", "worker_pid", "fifo"}``): once a worker has sat in the FIFO's open for 5
consecutive samples.

``python datasets_map.py slow``: not hung. The same ``map(num_proc=2)`` over examples that each take
a minute of CPU in the job's own code (feature extraction), with the library's progress bars off
(``datasets.disable_progress_bars()``): the parent polls its queue, both pool workers compute, and
nothing is written. READY (``{"pid", "workers"}``) once both workers have started an example.
"""

from __future__ import annotations

import os
import sys
import time

import _common
import datasets
from datasets import Dataset

SCENARIO = sys.argv[1] if len(sys.argv) > 1 else "blocked"


def load(example: dict) -> dict:
    with open(example["path"], "rb") as f:
        example["size"] = len(f.read())
    return example


def extract(example: dict) -> dict:
    _common.write_marker(f"started-{os.getpid()}", pid=os.getpid())
    started, total = time.monotonic(), 0
    while time.monotonic() - started < 60:  # a minute of CPU for each example
        total += sum(i * i for i in range(1000))
    example["feature"] = total
    return example


def slow() -> None:
    def started() -> list:
        return sorted(p.name.split("-", 1)[1] for p in _common.workdir().glob("started-*"))

    _common.ready_when(lambda: len(started()) >= 2, lambda: {"workers": [int(pid) for pid in started()]})
    datasets.disable_progress_bars()
    print("extracting features with 2 processes", flush=True)
    Dataset.from_dict({"x": list(range(8))}).map(extract, num_proc=2)
    print("extracted", flush=True)


def main() -> None:
    if SCENARIO == "slow":
        return slow()
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
