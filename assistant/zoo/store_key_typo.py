"""Hang: a worker waits in ``TCPStore.get`` for a key that no process sets: the coordinator sets it
under another spelling (cause ``thread-deadlock``).

``python store_key_typo.py``. The coordinator starts a ``torch.distributed.TCPStore`` (master, on a free
port, a timeout of an hour), writes its shard list and sets ``"shard_ready"``; a ``multiprocessing``
worker (spawn) connects as a client and calls ``store.get("shards_ready")``, which waits until that
key exists. The coordinator then waits for the worker (``join``). (The tenth hunt's j11, read as an
external service.)

READY (``{"pid", "worker_pid", "get_line", "set_line"}``): once the worker has slept in its get for 5
consecutive samples.
"""

from __future__ import annotations

import datetime
import inspect
import multiprocessing

import _common

WAIT = datetime.timedelta(hours=1)


def worker(port: int) -> None:
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", port, is_master=False, timeout=WAIT)
    _common.write_marker("worker")
    shards = store.get("shards_ready")  # the coordinator sets "shard_ready"
    print(f"worker got {shards!r}", flush=True)


def coordinate(store) -> None:
    store.set("shard_list", "0,1,2,3")
    store.set("shard_ready", "1")


def line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def main() -> None:
    from torch.distributed import TCPStore

    port = _common.free_port()
    store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=WAIT)
    child = multiprocessing.get_context("spawn").Process(target=worker, args=(port,), name="shard-worker")
    child.start()
    coordinate(store)

    def worker_waits() -> bool:
        return _common.read_marker("worker") is not None and _common.sleeping_steadily(child.pid)

    _common.ready_when(
        worker_waits,
        lambda: {
            "worker_pid": child.pid,
            "get_line": line_of(worker, 'store.get("shards_ready")'),
            "set_line": line_of(coordinate, 'store.set("shard_ready"'),
        },
    )
    child.join()


if __name__ == "__main__":
    main()
