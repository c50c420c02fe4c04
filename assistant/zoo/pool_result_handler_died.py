"""Hang: a pre-tokenizing Pool.map whose worker raises an exception the parent cannot unpickle
(the eighteenth hunt's j01)::

    class CorruptShardError(Exception):
        def __init__(self, path, offset):
            super().__init__(f"corrupt record in {path} at byte {offset}")   # args: one string

The worker pickles it (its args: one message); the parent's result-handler thread rebuilds it as
CorruptShardError(message), which raises TypeError, and the thread dies ("Exception in thread ...
(_handle_results)"). Pool.map waits for ever. It was "a worker died mid-task (killed, out of memory)",
with a dmesg grep.

READY (``{"pid"}``) once the result-handler thread is gone and the main thread sleeps in map.
"""

from __future__ import annotations

import multiprocessing
import os
import threading

import _common


class CorruptShardError(Exception):
    def __init__(self, path: str, offset: int) -> None:
        super().__init__(f"corrupt record in {path} at byte {offset}")
        self.path, self.offset = path, offset


def tokenize_shard(index: int) -> tuple:
    if index == 5:
        raise CorruptShardError(f"data/shard_{index:04d}.jsonl", 4100 * 231)
    return index, sum(len(word) for word in ("the of and to in a is that " * 200).split())


def handler_gone() -> bool:
    return not any("_handle_results" in thread.name for thread in threading.enumerate())


if __name__ == "__main__":
    _common.ready_when(lambda: handler_gone() and _common.sleeping_steadily(os.getpid()))
    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = pool.map(tokenize_shard, range(12), chunksize=1)
    _common.log(f"tokenized {len(results)} shards")
