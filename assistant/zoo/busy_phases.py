"""Not hung: a job with quiet-but-busy phases. `watch` must learn them, not call them stalls.

Prints ``step N loss X`` (flushed) every 0.05 to 0.1 s; every ``--every`` steps (default 80: about
6 s, more than the 20 step intervals watch's threshold remembers, as watch reads the log 4 times a
second) it runs a CPU-bound scoring pass of about
``--pass-seconds`` (default 5 s) that logs nothing: pure Python, batch after batch through
``tokenize``, ``embed``, ``score`` and ``aggregate``, the middle two recursing over a nested
structure to a depth that changes with the batch, so the main thread's chain of functions keeps
changing (py-spy: ``embed``/``score`` at one of 12 depths under ``scoring_pass`` most of the time,
no chain in more than a few percent of the samples).

After ``--passes`` passes (default: for ever) and ``--every`` more steps, ``--then`` says what it does:
- ``finish``: prints ``training done`` and exits 0;
- ``freeze``: hangs idle in ``wait_for_batch`` (a sleep): frozen, no CPU;
- ``spin``: spins for ever on one line of ``spin_until_ready``: the same chain of functions, busy;
- ``endless``: a scoring pass that never ends: moving, busy, for ever.

Markers in ``<workdir>``: ``READY`` (``{"pid", "passes"}``) once the first pass has ended and
steps flow again (never with ``--passes 0``); ``PASSES`` (``{"pid", "passes"}``) after each pass; ``FINAL``
(``{"pid", "then", "step"}``) just before it enters its ``--then`` state, after its last step line.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import _common

DEPTHS = 12  # recursion depths that embed and score take in turn


def tokenize(batch: int) -> list:
    return [(batch * 31 + i * 17) % 1009 for i in range(400)]


def embed(tokens: list, depth: int) -> list:
    if depth > 0:
        return embed(tokens, depth - 1)
    return [((t * 7) % 13) / 13.0 for t in tokens for _ in range(6)]


def score(vectors: list, depth: int) -> float:
    if depth > 0:
        return score(vectors, depth - 1)
    total = 0.0
    for i, v in enumerate(vectors):
        total += (v * i) % 1.0
    return total


def aggregate(total: float, value: float, batch: int) -> float:
    for i in range(100):
        total += (value * i + batch) % 3.0 * 1e-9
    return total


def scoring_pass(seconds: float) -> float:
    deadline = time.monotonic() + seconds
    batch, total = 0, 0.0
    while seconds <= 0 or time.monotonic() < deadline:
        batch += 1
        vectors = embed(tokenize(batch), batch % DEPTHS)
        total = aggregate(total, score(vectors, (batch * 5) % DEPTHS), batch)
    return total


def wait_for_batch() -> None:
    _common.sleep_forever()


def spin_until_ready() -> None:
    ready = False
    while not ready:
        ready = ready or time.monotonic() < 0


def train_steps(first: int, count: int, rng: random.Random) -> int:
    for step in range(first, first + count):
        time.sleep(rng.uniform(0.05, 0.1))
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
    return first + count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=80, help="steps between two scoring passes")
    parser.add_argument("--pass-seconds", type=float, default=5.0)
    parser.add_argument("--passes", type=int, default=None, help="passes before --then (default: for ever)")
    parser.add_argument("--then", choices=("finish", "freeze", "spin", "endless"), default="finish")
    args = parser.parse_args()
    rng = random.Random(0)
    step, passes = 1, 0
    while args.passes is None or passes < args.passes:
        step = train_steps(step, args.every, rng)
        scoring_pass(args.pass_seconds)
        passes += 1
        _common.write_marker("PASSES", passes=passes)
        if passes == 1:
            step = train_steps(step, 1, rng)
            _common.mark_ready(passes=passes)
    step = train_steps(step, args.every, rng)
    _common.write_marker("FINAL", then=args.then, step=step - 1)
    if args.then == "finish":
        print("training done", flush=True)
        return
    if args.then == "freeze":
        wait_for_batch()
    elif args.then == "spin":
        spin_until_ready()
    else:
        scoring_pass(0.0)


if __name__ == "__main__":
    sys.exit(main())
