"""Jobs judged by their own step rhythm; one scenario per argument (``rhythm.py <scenario>``).

Both write ``<workdir>/train.log`` (stdout goes there too), one ``YYYY-MM-DD HH:MM:SS.fff step N``
line per step, so the tool can learn the job's step interval from the log.

- ``gc_slowed``: 40 steps of ~5 ms, then the job builds a long-lived graph of a million reference
  cycles and from then on runs a full ``gc.collect()`` in every step: each step now takes ~0.15 s or
  more, dozens of times its own rhythm. Not hung: slow, because of garbage collection.
- ``eval_pass``: 40 steps of ~50 ms, then a long evaluation pass (``evaluate`` scoring batch after
  batch in ``score_batch``, pure Python, for ever) that logs nothing. The pass is made to have run
  for 10 minutes already: the training lines carry timestamps 600 s in the past and the log's
  mtime is set back by 600 s, as a job that entered evaluation 10 minutes ago would look. Not hung,
  not slow: in an evaluation pass.

READY (``{"pid", "scenario", "log"}``): ``gc_slowed`` after 4 slow steps; ``eval_pass`` once inside
``evaluate``.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from datetime import datetime

import _common

FAST_STEPS = 40
AGE = 600.0  # eval_pass: how long ago the evaluation pass began


def log_step(out, step: int, shift: float = 0.0, **values) -> None:
    stamp = datetime.fromtimestamp(time.time() - shift).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    extra = " ".join(f"{k} {v:.4f}" for k, v in values.items())
    out.write(f"{stamp} step {step} {extra}\n")
    out.flush()


def gc_slowed(out, path: str) -> None:
    gc.disable()
    step = 0
    for step in range(FAST_STEPS):
        time.sleep(0.005)
        log_step(out, step, loss=1.0 / (step + 1))
    graph = []
    for _ in range(1_000_000):  # long-lived cycles: every full collection walks them all
        a, b = [], []
        a.append(b)
        b.append(a)
        graph.append(a)
    slow = 0
    while True:
        step += 1
        junk = [[] for _ in range(1000)]
        for item in junk:
            item.append(item)
        del junk
        gc.collect()  # the bug: a full collection in every step over a huge heap
        log_step(out, step, loss=1.0 / (step + 1))
        slow += 1
        if slow == 4:
            _common.mark_ready(scenario="gc_slowed", log=path)


def score_batch(batch: int) -> float:
    return sum((i * batch) % 7 / 7.0 for i in range(20000))


def evaluate(out, path: str) -> float:
    score, batch = 0.0, 0
    _common.mark_ready(scenario="eval_pass", log=path)
    while True:  # the model's forward pass, batch after batch: long, and silent
        batch += 1
        score += score_batch(batch)
    return score


def eval_pass(out, path: str) -> None:
    for step in range(FAST_STEPS):
        time.sleep(0.05)
        log_step(out, step, shift=AGE + (FAST_STEPS - step) * 0.05, loss=1.0 / (step + 1))
    out.write(f"{datetime.fromtimestamp(time.time() - AGE):%Y-%m-%d %H:%M:%S} running evaluation\n")
    out.flush()
    past = time.time() - AGE
    os.utime(path, (past, past))
    evaluate(out, path)


if __name__ == "__main__":
    scenarios = {"gc_slowed": gc_slowed, "eval_pass": eval_pass}
    if len(sys.argv) != 2 or sys.argv[1] not in scenarios:
        sys.exit("usage: rhythm.py {gc_slowed,eval_pass}")
    log_path = str(_common.workdir() / "train.log")
    with open(log_path, "a", buffering=1) as log_file:
        os.dup2(log_file.fileno(), 1)  # stdout is the log, as under `python train.py > train.log`
        scenarios[sys.argv[1]](log_file, log_path)
