"""Target for test_watch: a healthy job with irregular step times and a slow checkpoint phase.

Prints ``step k loss X`` (flushed) after a sleep of ``--interval`` x a random factor from 0.4 to
1.6 (seeded), and every ``--checkpoint-every`` steps calls ``save_checkpoint``, which writes
``ckpt.json`` in small chunks for ``--save-factor`` x ``--interval`` seconds (a save on slow
storage: the stack sits in ``save_checkpoint`` and the process does I/O all along), then replaces
the old checkpoint atomically. Exits 0 after ``--steps`` steps.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time


def save_checkpoint(path: str, step: int, seconds: float) -> None:
    tmp = f"{path}.tmp"
    deadline = time.monotonic() + seconds
    with open(tmp, "w") as fh:
        while time.monotonic() < deadline:
            fh.write("0" * 65536)  # slow storage: a chunk every 50 ms
            fh.flush()
            time.sleep(0.05)
    with open(tmp, "w") as fh:
        json.dump({"step": step}, fh)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--checkpoint-every", type=int, default=8)
    parser.add_argument("--save-factor", type=float, default=3.5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for step in range(1, args.steps + 1):
        time.sleep(args.interval * rng.uniform(0.4, 1.6))
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
        if step % args.checkpoint_every == 0:
            save_checkpoint("ckpt.json", step, args.save_factor * args.interval)
            print(f"saved checkpoint step {step}", flush=True)
    print("training done", flush=True)


if __name__ == "__main__":
    main()
