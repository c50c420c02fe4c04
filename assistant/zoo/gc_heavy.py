"""Not hung but crawling: the process spends nearly all its time in full garbage collections (``gc-pause``).

It builds a long-lived graph of 2 million objects (1 million two-list reference cycles, ~200 MB),
then loops: allocate a little cyclic garbage, ``gc.collect()`` (a full collection walks the whole
graph, ~0.3 s on one core), and only every 10th collection write a ``step N`` line with the
fraction of time spent in gc (measured with ``gc.callbacks``; ~0.99). One core at 100%, stack
almost always on the ``gc.collect()`` line.

py-spy, MainThread active+gil::

    train_step (gc_heavy.py)      <- the gc.collect() line, in most samples
    main (gc_heavy.py)
    <module> (gc_heavy.py)

(``--native``: ``gc_collect_main``/``collect`` (gcmodule.c) under ``gc_collect``.)

READY (``{"pid", "gc_line", "objects"}``): after the graph is built and two full collections ran.
``gc_line`` is the line number of the ``gc.collect()`` call.
"""

from __future__ import annotations

import gc
import sys
import time

import _common

PAIRS = 1_000_000
GC_LINE = 0
gc_time = 0.0
_gc_started = 0.0


def _on_gc(phase: str, info: dict) -> None:
    global gc_time, _gc_started
    if phase == "start":
        _gc_started = time.perf_counter()
    else:
        gc_time += time.perf_counter() - _gc_started


def build_graph(pairs: int) -> list:
    gc.disable()  # build quickly; collections start below
    graph = []
    for _ in range(pairs):
        a = []
        b = [a]
        a.append(b)
        graph.append(a)
    gc.enable()
    return graph


def train_step(step: int) -> None:
    global GC_LINE
    garbage = []
    for i in range(5000):
        node = {"step": step, "i": i}
        node["self"] = node
        garbage.append(node)
    del garbage
    GC_LINE = sys._getframe().f_lineno + 1
    gc.collect()


def main() -> None:
    graph = build_graph(PAIRS)
    gc.callbacks.append(_on_gc)
    started = time.perf_counter()
    step = 0
    while True:
        train_step(step)
        step += 1
        if step == 2:
            _common.mark_ready(gc_line=GC_LINE, objects=2 * len(graph))
        if step % 10 == 0:
            fraction = gc_time / (time.perf_counter() - started)
            print(f"step {step} gc_fraction {fraction:.3f}", flush=True)


if __name__ == "__main__":
    main()
