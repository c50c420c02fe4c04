"""Hang: shard statistics computed in ``spawn`` child processes that report through a queue the file
makes at module level (the thirteenth hunt's j11: no cause named, "Compile in-process" first)::

    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()                 # at import: every spawned child imports the file again

    def shard_stats(shard):
        results.put(...)                  # into the child's own queue

    for p in procs: p.start(); ...; p.join()
    stats = [results.get() for _ in procs]    # nobody will ever put into this one

The children put into queues of their own and exit; the main process reads a pipe whose write end
only it holds, with no other thread (multiprocessing's resource tracker is its only child).

READY (``{"pid"}``): once both children have exited and the main thread has slept in ``get`` for 5
consecutive samples.
"""

from __future__ import annotations

import multiprocessing

import _common

ctx = multiprocessing.get_context("spawn")
results = ctx.Queue()


def shard_stats(shard: int) -> None:
    total = sum(k * shard for k in range(10000))
    results.put((shard, total))
    print(f"shard {shard} reported", flush=True)


if __name__ == "__main__":
    procs = [ctx.Process(target=shard_stats, args=(s,)) for s in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    _common.ready_when(_common._main_sleeps_in("get"))
    print("children finished; collecting", flush=True)
    stats = [results.get() for _ in procs]
    print("stats", stats, flush=True)
