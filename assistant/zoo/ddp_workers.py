"""Hang: 2 gloo ranks with 4 DataLoader workers each; rank 1's workers never deliver a batch.

Run under the launcher (the spawner does): ``python -m torch.distributed.run --nproc_per_node=2
... ddp_workers.py``. Every rank iterates a DataLoader(num_workers=4) and all_reduces each step.
At step 2, rank 1's dataset blocks for ever in ``__getitem__`` (in every worker), so rank 1 waits
in ``_try_get_data`` while rank 0 waits in ``all_reduce``: a job of 2 ranks x 4 workers, the
shape the live-collection benchmark times.

``--workers N`` sets the DataLoader workers per rank (default 4); with ``--nproc_per_node=8`` and
``--workers 8`` it is the 73-process job of the live benchmark.

READY (written by rank 0 just before the all_reduce that never completes): ``{"pid": rank 0}``.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import _common
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

STALL_STEP = 2


class BlockingDataset(Dataset):
    def __init__(self, rank: int):
        self.rank = rank

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, index: int):
        if self.rank == 1 and index >= STALL_STEP * 4:
            _common.sleep_forever()
        return torch.ones(4)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank = dist.get_rank()
    workers = int(sys.argv[sys.argv.index("--workers") + 1]) if "--workers" in sys.argv else 4
    loader = DataLoader(BlockingDataset(rank), batch_size=4, num_workers=workers, prefetch_factor=1)
    for step, batch in enumerate(loader):
        total = batch.sum()
        if rank == 0 and step == STALL_STEP:
            _common.mark_ready(pid=os.getpid())
        dist.all_reduce(total)


if __name__ == "__main__":
    main()
