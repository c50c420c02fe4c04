"""Hang: two DDP ranks started by ``torch.multiprocessing.spawn`` (CPU, gloo); rank 1 blocks
opening its shard, a FIFO nobody writes, while rank 0 waits for it in DDP's gradient all-reduce.

Run directly: ``python assistant/zoo/mp_spawn_ranks.py``. The parent sets ``MASTER_ADDR`` and a free
``MASTER_PORT`` and calls ``mp.spawn(worker, nprocs=2)``: its children are ``python -c "from
multiprocessing.spawn import spawn_main; ..."`` processes running torch's ``_wrap`` (no ``RANK`` in
their environment: the rank is ``fn``'s first argument), as DDP's tutorials start them. At step
``BLOCK_STEP`` rank 1 opens ``<workdir>/shard1.fifo`` (made with mkfifo, never opened for writing)::

    if rank == 1 and step == BLOCK_STEP:
        with open(shard) as f:   # the shard never arrives

Rank 0 goes on to the step's backward and waits in the reducer for rank 1's gradients. The parent
waits in ``ProcessContext.join``; multiprocessing's resource tracker is a child of the parent too.

READY (``{"pid": the parent, "rank0_pid", "rank1_pid", "path": the FIFO}``): written by the parent
once rank 1 sits in open() of the FIFO and rank 0 has slept in backward for 5 consecutive samples
(each rank announces ``<workdir>/waiting-<rank>``).
"""

from __future__ import annotations

import os

import _common
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

BLOCK_STEP = 3
progress = {"step": 0}


def worker(rank: int, world: int, shard: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    _common.announce_shard_wait(rank, "backward", lambda: progress["step"] >= BLOCK_STEP)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
    for step in range(100):
        progress["step"] = step
        if rank == 1 and step == BLOCK_STEP:
            with open(shard) as f:  # the shard never arrives
                f.read()
        model(torch.randn(4, 8)).sum().backward()
        print(f"rank {rank} step {step}", flush=True)


def main() -> None:
    shard = str(_common.workdir() / "shard1.fifo")
    os.mkfifo(shard)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(_common.free_port())
    _common.ready_when_ranks_wait(path=shard)
    mp.spawn(worker, args=(2, shard), nprocs=2, join=True)


if __name__ == "__main__":
    main()
