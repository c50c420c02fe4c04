"""Two DDP ranks (gloo) with unequal work per step: healthy (``ddp_long_backward.py``, under the
launcher as ``torch.distributed.run --nproc_per_node=2``).

Batches are bucketed by length and each rank draws from its own bucket. Long batches go through a
rotation layer, an orthogonal matrix made as ``matrix_exp`` of a skew-symmetric parameter (as
``torch.nn.utils.parametrizations.orthogonal`` does): short ones skip it (DDP with
``find_unused_parameters=True``). Rank 1 holds the long bucket: its backward, ``matrix_exp``'s native
gradient, runs for many seconds inside ``loss.backward()``, while rank 0, done with its own backward,
waits at the end of that same call for DDP's gradient all-reduce (c10d::Reducer::finalize_backward).
Both ranks' Python stacks are the same: ``_engine_run_backward <- backward <- backward <- train``.

READY (``{"pid", "rank0_pid", "rank1_pid"}``) once rank 1 has entered ``loss.backward()`` of its
second step and rank 0's main thread sleeps.
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta

import _common
import torch
import torch.distributed as dist

ROTATION_SIZE = 1700  # matrix_exp's backward of this size: about 15 s on one core


class Encoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(16, ROTATION_SIZE)
        self.skew = torch.nn.Parameter(torch.randn(ROTATION_SIZE, ROTATION_SIZE) / ROTATION_SIZE)
        self.head = torch.nn.Linear(ROTATION_SIZE, 2)

    def rotation(self) -> torch.Tensor:
        return torch.linalg.matrix_exp(self.skew - self.skew.T)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x).mean(1)
        if x.shape[1] > 256:  # long sequences go through the rotation
            h = h @ self.rotation()
        return self.head(h)


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(Encoder(), find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), 1e-3)
    seq_len = {0: 32, 1: 1024}[rank]  # each rank draws from its own length bucket
    for step in range(1, 10**6):
        x = torch.randn(8, seq_len, 16)
        loss = torch.nn.functional.cross_entropy(model(x), torch.randint(0, 2, (8,)))
        opt.zero_grad()
        if step == 2:
            _common.write_marker(f"in_backward-{rank}", tid=threading.get_native_id())
            if rank == 1:
                ready_when_rank0_waits()
        loss.backward()
        opt.step()
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)


def ready_when_rank0_waits() -> None:
    def rank0_waits() -> bool:
        rank0 = _common.read_marker("in_backward-0")
        return bool(rank0) and _common.sleeping_steadily(rank0["pid"], rank0["tid"])

    def rank0_info() -> dict:
        return {"rank0_pid": _common.read_marker("in_backward-0")["pid"], "rank1_pid": os.getpid(), "pid": os.getppid()}

    _common.ready_when(rank0_waits, rank0_info)


if __name__ == "__main__":
    main()
