"""A trainer and worker processes that share a ``multiprocessing.Manager``'s objects; one scenario
per argument (``manager_clients.py <scenario>``). Each proxy call is a request to the Manager's
server process, whose main thread idles in ``serve_forever`` and whose handler threads (one per
client) run the calls.

- ``producer_died``: hang. A producer process puts records on ``Manager().Queue()`` and raises at
  a corrupt one (its traceback in the log, a zombie after); the trainer waits in ``q.get()`` (the
  twelfth hunt's j01: blamed on the server's idle main thread, "an Event nobody sets").
- ``holder_killed``: hang. Three prep workers update a ``Manager().dict()`` under a
  ``Manager().Lock()``; one is killed by SIGKILL inside ``with lock:`` (what the out-of-memory
  killer sends) and reaped by the trainer's ``join``; the trainer and the other two wait for the
  lock (the twelfth hunt's j22).
- ``producers_compute``: not hung. Two producer processes compute for a minute per item and put
  it on the Manager's queue; the trainer waits in ``q.get()`` (the twelfth hunt's h05, called HUNG).

READY (``{"pid", "scenario", "manager_pid", "children"}``) once the trainer's main thread sleeps
in its proxy call for a few samples (and, for ``producer_died``, the producer has exited).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time

import _common

SCENARIOS = ("producer_died", "holder_killed", "producers_compute")
SCENARIO = sys.argv[1] if sys.argv[1:] else ""


def produce(q, count: int) -> None:
    for index in range(count):
        if index == 4:
            raise RuntimeError(f"corrupt record in shard 0 at index {index}")
        q.put({"index": index, "tokens": list(range(8))})


def produce_slowly(q, worker: int) -> None:
    started = time.monotonic()
    for index in range(100):
        total = 0
        while time.monotonic() - started < 60 * (index + 1):
            total += sum(k * k for k in range(1000))
        q.put((worker, index, total))


def prep(index: int, lock, stats) -> None:
    for round_ in range(100):
        with lock:
            stats[index] = stats.get(index, 0) + 1
            if index == 1 and round_ == 2:
                os.kill(os.getpid(), signal.SIGKILL)  # stands in for the out-of-memory killer
        time.sleep(0.05)


def announce(manager, children, extra=lambda: True) -> None:
    waits = _common._main_sleeps_in("_callmethod")
    _common.ready_when(
        lambda: extra() and waits(),
        lambda: {
            "pid": os.getpid(),
            "scenario": SCENARIO,
            "manager_pid": manager._process.pid,
            "children": [c.pid for c in children],
        },
    )


def main() -> None:
    manager = mp.Manager()
    if SCENARIO == "holder_killed":
        lock, stats = manager.Lock(), manager.dict()
        workers = [mp.Process(target=prep, args=(i, lock, stats), name=f"prep-{i}") for i in range(3)]
        for worker in workers:
            worker.start()
        workers[1].join()
        print("prep workers exit codes", [w.exitcode for w in workers], flush=True)
        announce(manager, workers)
        for step in range(100):
            with lock:  # the holder is dead: no client will release it
                stats["trainer"] = step
            print(f"step {step}", flush=True)
        return
    q = manager.Queue()
    if SCENARIO == "producer_died":
        producers = [mp.Process(target=produce, args=(q, 100), name="shard-producer")]
    else:
        producers = [mp.Process(target=produce_slowly, args=(q, w), name=f"producer-{w}") for w in range(2)]
    for producer in producers:
        producer.start()
    # the producer left a zombie: nothing polls it (exitcode would reap it)
    announce(manager, producers, lambda: SCENARIO != "producer_died" or _common.task_state(producers[0].pid) == "Z")
    for step in range(200):
        item = q.get()
        print(f"step {step} item {item if isinstance(item, tuple) else item['index']}", flush=True)


if __name__ == "__main__":
    if SCENARIO not in SCENARIOS:
        sys.exit(f"usage: manager_clients.py {{{','.join(SCENARIOS)}}}")
    main()
