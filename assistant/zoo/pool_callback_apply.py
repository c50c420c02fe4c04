"""Hang: a multiprocessing Pool callback that calls back into its pool (``python pool_callback_apply.py``;
the fifteenth hunt's j02).

``pool.apply_async(featurize, (shard,), callback=on_done)``, and ``on_done`` computes the shard's
statistics with ``pool.apply(shard_stats, ...)``. Callbacks run in the pool's one result-handler
thread, which is also the only thread that delivers results: the apply waits for ever, and so does
the main thread's ``get()``. It was read as "a worker died mid-task, the task is lost".

READY (``{"pid"}``) once the main thread has slept in ``get`` for a few samples.
"""

from __future__ import annotations

import multiprocessing as mp
import os

import _common

stats: dict = {}
pool = None


def featurize(shard: int) -> tuple:
    return shard, [((shard * 7919 + i) % 1000) / 1000 for i in range(2000)]


def shard_stats(values: list) -> tuple:
    mean = sum(values) / len(values)
    return mean, max(values) - min(values)


def on_done(result: tuple) -> None:
    shard, values = result
    stats[shard] = pool.apply(shard_stats, (values,))  # the slip: a wait for the pool inside its callback
    print(f"shard {shard} stats {stats[shard]}", flush=True)


if __name__ == "__main__":
    pool = mp.Pool(2)
    print("featurizing 8 shards with 2 workers", flush=True)
    pending = [pool.apply_async(featurize, (shard,), callback=on_done) for shard in range(8)]
    _common.ready_when(_common._main_sleeps_in("get"), lambda: {"pid": os.getpid()})
    for result in pending:
        shard, values = result.get()
        print(f"shard {shard} ready ({len(values)} values)", flush=True)
