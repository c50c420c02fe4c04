"""Target for test_watch and bench/watch.py: a job that hangs at step N, and resumes from its
checkpoint when restarted.

Prints ``step k loss X`` (flushed) every 0.3 to 1 s (exactly every ``--interval`` s if given) and
saves ``ckpt.pt`` (atomically) in the current directory every ``--every`` steps: a zip in
``torch.save``'s layout (``archive/data.pkl`` holding ``{"step": N}``), written with the standard
library so the target starts in milliseconds, but a valid torch checkpoint for anything that checks
(debug_stuck.recovery.plan picks it, and ``torch.load`` reads it). At the start it resumes from
``--resume PATH``, else from ``ckpt.pt`` when that exists (``resumed from checkpoint step S``).

Before printing step ``--hang-at`` it hangs for ever (a sleep in ``wait_for_peers``, like a rank
waiting in a collective): only on the first run (the marker file ``hung-once`` says it happened),
so a restarted run goes on past that step; with ``--always`` on every run (a deterministic hang).
Exits 0 after ``--steps`` steps. Unknown options (a resume command may add some) are ignored.
``--start-when FILE``: wait until FILE exists before the first step (a watcher attaches first).
``--exit-hang``: a non-daemon "metrics-flusher" thread loops on ``stop.wait(1.0)`` and nobody sets
``stop``: once training is done, Python's exit waits for it for ever (a hang after the last step).
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import threading
import time
import zipfile

CHECKPOINT = "ckpt.pt"
MARKER = "hung-once"


def wait_for_peers() -> None:
    while True:
        time.sleep(3600)


def flush_metrics(stop: threading.Event) -> None:
    while not stop.wait(1.0):
        pass  # stop is never set: the bug


def save_checkpoint(step: int) -> None:
    tmp = f"{CHECKPOINT}.tmp"
    with zipfile.ZipFile(tmp, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"step": step}, protocol=2))
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/version", "3\n")
    os.replace(tmp, CHECKPOINT)
    print(f"saved checkpoint step {step}", flush=True)


def load_checkpoint(path: str) -> int:
    with zipfile.ZipFile(path) as zf:
        name = next(n for n in zf.namelist() if n.endswith("data.pkl"))
        return int(pickle.loads(zf.read(name))["step"])  # our own file, written above


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hang-at", type=int, default=8)
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--every", type=int, default=3)
    parser.add_argument("--always", action="store_true")
    parser.add_argument("--interval", type=float, default=None)
    parser.add_argument("--resume", metavar="PATH", default=None)
    parser.add_argument("--start-when", metavar="FILE", default=None)
    parser.add_argument("--exit-hang", action="store_true")
    args, _ = parser.parse_known_args()
    if args.exit_hang:
        stop = threading.Event()
        threading.Thread(target=flush_metrics, args=(stop,), name="metrics-flusher").start()  # not a daemon
    while args.start_when and not os.path.exists(args.start_when):
        time.sleep(0.05)
    start = 0
    source = args.resume or (CHECKPOINT if os.path.exists(CHECKPOINT) else None)
    if source and os.path.exists(source):
        start = load_checkpoint(source)
        print(f"resumed from checkpoint step {start}", flush=True)
    rng = random.Random(start)
    for step in range(start + 1, args.steps + 1):
        if step == args.hang_at and (args.always or not os.path.exists(MARKER)):
            with open(MARKER, "w") as fh:
                fh.write(str(os.getpid()))
            wait_for_peers()
        time.sleep(args.interval if args.interval is not None else rng.uniform(0.3, 1.0))
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
        if step % args.every == 0:
            save_checkpoint(step)
    print("training done", flush=True)


if __name__ == "__main__":
    main()
