"""Negative control: a healthy job that logs to a file it holds open, not to stdout.

Each step computes for ~0.25 s (pure Python, one function) and sleeps ~0.15 s, then appends
``step N loss X`` to ``<workdir>/train.log``, a file opened once for the whole run, as
``logging.FileHandler`` would. stdout says nothing. Two stack samples a second apart show the same
chain of functions (the step, or the sleep), so only the growing file tells that it progresses.

READY (``{"pid", "log"}``): after 5 steps.
"""

from __future__ import annotations

import time

import _common

COMPUTE_SECONDS = 0.25
SLEEP_SECONDS = 0.15


def train_step(step: int) -> float:
    deadline = time.monotonic() + COMPUTE_SECONDS
    loss = 1.0
    while time.monotonic() < deadline:
        loss = loss * 0.999 + 1e-6 * step
    return loss


def main() -> None:
    path = _common.workdir() / "train.log"
    with open(path, "a", buffering=1) as log:
        step = 0
        while True:
            step += 1
            loss = train_step(step)
            log.write(f"step {step} loss {loss:.5f}\n")
            if step == 5:
                _common.mark_ready(log=str(path))
            time.sleep(SLEEP_SECONDS)


if __name__ == "__main__":
    main()
