"""Hang: ``torch.multiprocessing.spawn`` starts 2 ranks for a world of 3 (cause ``rendezvous``).

Run directly: ``python assistant/zoo/spawn_world_short.py``. The world size comes from a stale
``WORLD_SIZE``-like setting (here: 3) while ``mp.spawn(..., nprocs=2)`` starts two ranks, each calling
``init_process_group("gloo", init_method="tcp://127.0.0.1:<free port>", rank=rank, world_size=3)``:
the world size reaches torch as an argument, in no rank's environment. Rank 0 hosts the TCPStore
and waits in ``_create_c10d_store`` for a third client; rank 1 gets through the store and waits in
process-group setup for rank 2, which never starts. The parent waits in ``ProcessContext.join``.

READY (``{"rank0_pid", "rank1_pid"}``): written by rank 0 once both ranks have slept for 5 consecutive
samples where they stay: rank 0 in ``_create_c10d_store``, rank 1 in ``_new_process_group_helper``.
"""

from __future__ import annotations

import os
from datetime import timedelta

import _common
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD_SIZE = 3
NPROCS = 2


def worker(rank: int, world_size: int, port: int) -> None:
    # where each stays for good: rank 0 in the store it hosts, rank 1 past it in the group's setup
    _common.announce_rank_wait(rank, "_create_c10d_store" if rank == 0 else "_new_process_group_helper")
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=timedelta(hours=1)
    )
    print(f"rank {rank} joined (should never happen)", flush=True)


def main() -> None:
    port = _common.free_port()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    print(f"spawning {NPROCS} processes, world_size={WORLD_SIZE}", flush=True)
    _common.workdir()
    mp.spawn(worker, args=(WORLD_SIZE, port), nprocs=NPROCS, join=True)


if __name__ == "__main__":
    main()
