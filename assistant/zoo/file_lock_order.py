"""Hang: two processes of a job take two file locks (``filelock.FileLock``) in opposite orders
(``python file_lock_order.py``).

A feature cache on disk is guarded per clip (``clip_00017.lock``) and for its index (``index.json.lock``).
The prefetch process reads a clip under its lock, then records the read in the index
(``read_clip``: clip, then index); the pruner drops old clips from the index under the index lock,
then deletes each clip under its lock (``prune``: index, then clip). Each holds the lock the other
wants. A barrier after the first acquire makes the deadlock certain. The trainer waits for the
prefetcher's next clip in a queue for ever.

READY (``{"pid", "prefetcher", "pruner", "clip_lock", "index_lock"}``) once both children sleep in their
second acquire.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os

import _common
from filelock import FileLock


def read_clip(cache: str, clip: int, both_hold, out) -> None:
    with FileLock(os.path.join(cache, f"clip_{clip:05d}.lock")):
        features = [clip * 0.5] * 16
        both_hold.wait()
        with FileLock(os.path.join(cache, "index.json.lock")):
            index_path = os.path.join(cache, "index.json")
            index = json.load(open(index_path)) if os.path.exists(index_path) else {}
            index[str(clip)] = "used"
            json.dump(index, open(index_path, "w"))
    out.put(features)


def prune(cache: str, clips: list, both_hold) -> None:
    with FileLock(os.path.join(cache, "index.json.lock")):
        both_hold.wait()
        for clip in clips:
            with FileLock(os.path.join(cache, f"clip_{clip:05d}.lock")):
                path = os.path.join(cache, f"clip_{clip:05d}.npy")
                if os.path.exists(path):
                    os.remove(path)


def main() -> None:
    cache = str(_common.workdir() / "cache")
    os.makedirs(cache, exist_ok=True)
    both_hold = mp.Barrier(2)
    clips: mp.Queue = mp.Queue()
    prefetcher = mp.Process(target=read_clip, args=(cache, 17, both_hold, clips), name="prefetch")
    pruner = mp.Process(target=prune, args=(cache, [17, 18], both_hold), name="prune-cache")
    prefetcher.start()
    pruner.start()
    children = [prefetcher.pid, pruner.pid]
    _common.ready_when(
        lambda: all(_common.sleeping_steadily(pid, samples=10) for pid in children),
        lambda: {
            "prefetcher": prefetcher.pid,
            "pruner": pruner.pid,
            "clip_lock": os.path.join(cache, "clip_00017.lock"),
            "index_lock": os.path.join(cache, "index.json.lock"),
        },
    )
    features = clips.get()  # the next clip's features, for the training step
    print(f"got {len(features)} features", flush=True)


if __name__ == "__main__":
    main()
