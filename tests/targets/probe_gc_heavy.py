"""Target for test_probe_gc: a process that spends most of its time in the cyclic garbage collector.

It keeps a long-lived graph of PAIRS two-list reference cycles (argv[1], default 400000), so every
full collection walks the whole heap, then loops: allocate cyclic garbage, gc.collect(). Prints
"ready" once the graph is built; runs until killed (or for argv[2] seconds when given).
"""

from __future__ import annotations

import gc
import sys
import time


def build(pairs: int) -> list:
    gc.disable()  # build fast; collections start in the loop
    graph = []
    for _ in range(pairs):
        a = []
        b = [a]
        a.append(b)
        graph.append(a)
    gc.enable()
    return graph


def main() -> None:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else None
    graph = build(pairs)
    print("ready", flush=True)
    started = time.monotonic()
    step = 0
    while seconds is None or time.monotonic() - started < seconds:
        garbage = []
        for i in range(2000):
            node = {"step": step, "i": i}
            node["self"] = node
            garbage.append(node)
        del garbage
        gc.collect()
        step += 1
    print(f"done {step} steps over {len(graph)} pairs", flush=True)


if __name__ == "__main__":
    main()
