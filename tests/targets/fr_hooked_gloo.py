"""Target for test_flight_recorder's hook test: a torchrun gloo job whose ranks install
debug_stuck.hook with the Flight Recorder on, then hang: rank 1 skips the second all_reduce and
waits for ever, rank 0 blocks in it (the main thread in C, the GIL released). Each rank writes
$ZOO_WORKDIR/rank<N>.ready just before it hangs; rank 1 also writes $ZOO_WORKDIR/READY."""

from __future__ import annotations

import os
import threading

import debug_stuck.hook

debug_stuck.hook.install()

import torch  # noqa: E402 - the hook goes in first, as the README tells users
import torch.distributed as dist  # noqa: E402


def ready(name: str) -> None:
    with open(os.path.join(os.environ["ZOO_WORKDIR"], name), "w") as fh:
        fh.write("{}")


def skip_the_all_reduce() -> None:
    ready("READY")
    threading.Event().wait()


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.all_reduce(t)  # site:hook:first
    ready(f"rank{rank}.ready")
    if rank == 1:
        skip_the_all_reduce()
    dist.all_reduce(t)  # site:hook:hang


if __name__ == "__main__":
    main()
