"""Hang: two ranks started by ``accelerate.notebook_launcher`` (CPU, gloo); rank 1 blocks opening
its shard, a FIFO nobody writes, while rank 0 waits for it in ``accelerator.wait_for_everyone()``.

Run directly: ``python assistant/zoo/accelerate_notebook.py``, as a notebook cell or a script calls
it. ``notebook_launcher(train, args, num_processes=2)`` (accelerate 1.x) runs torch elastic's agent
inside this process (``elastic_launch``: ``SimpleElasticAgent._invoke_run`` polls the workers), and
the agent forks the two ranks through ``torch.multiprocessing.start_processes``: no ``RANK`` in
their /proc environment (the agent's ``_wrap`` sets it in ``os.environ`` after the fork), the same
command line as this process. This process is their launcher, not a rank, though its frames are
torch.distributed's (elastic)::

    if accelerator.process_index == 1:
        with open(shard) as f:   # the shard never arrives

READY (``{"pid": this process, "rank0_pid", "rank1_pid", "path": the FIFO}``): written by this
process once rank 1 sits in open() of the FIFO and rank 0 has slept in ``barrier`` for 5
consecutive samples (each rank announces ``<workdir>/waiting-<rank>``).
"""

from __future__ import annotations

import os

import _common
import torch
from accelerate import Accelerator, notebook_launcher


def train(shard: str) -> None:
    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index
    _common.announce_shard_wait(rank, "barrier")
    total = torch.zeros(1)
    if rank == 1:
        with open(shard, "rb") as f:  # the shard never arrives
            total += len(f.read())
    accelerator.wait_for_everyone()
    accelerator.print(f"done {total.item()}", flush=True)


def main() -> None:
    shard = str(_common.workdir() / "shard1.fifo")
    os.mkfifo(shard)
    _common.ready_when_ranks_wait(path=shard)
    notebook_launcher(train, args=(shard,), num_processes=2, use_port=str(_common.free_port()))


if __name__ == "__main__":
    main()
