"""Healthy jobs that sleep most of the time; one scenario per argument (``paced.py <scenario>``).

Each makes steady progress, logs nothing, and is found asleep (or waiting for a sleeper) in nearly
every stack sample, one second apart. None is hung.

- ``throttled``: a torch training loop that keeps to a duty cycle: each step (an MLP's forward,
  backward and AdamW step on one thread, ~30-60 ms here) is followed by ``time.sleep(2.0)``.
- ``child_stream``: the trainer consumes ``for line in proc.stdout`` the JSON records of an extractor
  child (``python -c``) that computes a feature (numpy FFTs) and then sleeps 2.2 s before the next;
  the trainer takes one SGD step per record. The trainer waits in a pipe read, the child sleeps.
- ``slow_shard``: two gloo ranks (``torch.multiprocessing.spawn``); rank 1's ``Dataset.__getitem__``
  sleeps 0.5 s per item (slow storage; batch 4, ``num_workers=0``), rank 0's is instant, so rank 0
  waits in each gradient ``all_reduce`` for rank 1 most of the time. A step completes every ~2 s.

READY (``{"pid", "scenario", "child_pid"?, "rank0_pid"?, "rank1_pid"?}``): after three or four steps
(three records); ``pid`` is the process to diagnose (for ``slow_shard``, the parent of the ranks).
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time

import _common

EXTRACTOR = r"""
import json, sys, time
import numpy as np
rng = np.random.default_rng(0)
for i in range(10**6):
    x = rng.standard_normal(1 << 16)
    for _ in range(10):
        x = np.abs(np.fft.rfft(x, n=1 << 16))[: 1 << 15].repeat(2)
    sys.stdout.write(json.dumps({"id": i, "feat": (x[:64] / (x.max() + 1e-9)).tolist()}) + "\n")
    sys.stdout.flush()
    time.sleep(2.2)
"""


def throttled() -> None:
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(10**6):
        x = torch.randn(256, 512)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 3:
            _common.mark_ready(scenario="throttled")
        time.sleep(2.0)  # the duty cycle


def child_stream() -> None:
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    proc = subprocess.Popen([sys.executable, "-I", "-c", EXTRACTOR], stdout=subprocess.PIPE, text=True)
    for n, line in enumerate(proc.stdout, 1):
        x = torch.tensor(json.loads(line)["feat"]).unsqueeze(0)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if n == 3:
            _common.mark_ready(scenario="child_stream", child_pid=proc.pid)


class SlowShard:
    def __init__(self, rank: int):
        self.rank = rank

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, i: int):
        import torch

        if self.rank == 1:
            time.sleep(0.5)  # slow storage for this rank's shard
        g = torch.Generator().manual_seed(i)
        return torch.randn(128, generator=g), torch.randint(0, 10, (), generator=g)


def slow_shard_rank(rank: int, world: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(hours=1))
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    pids = [None] * world
    dist.all_gather_object(pids, os.getpid())
    for step, (x, y) in enumerate(DataLoader(SlowShard(rank), batch_size=4, num_workers=0)):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        if rank == 0 and step == 3:
            _common.mark_ready(scenario="slow_shard", rank0_pid=pids[0], rank1_pid=pids[1], pid=os.getppid())


def slow_shard() -> None:
    import torch.multiprocessing as mp

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(_common.free_port())
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    mp.spawn(slow_shard_rank, args=(2,), nprocs=2, join=True)


SCENARIOS = {"throttled": throttled, "child_stream": child_stream, "slow_shard": slow_shard}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        sys.exit(f"usage: paced.py {{{','.join(SCENARIOS)}}}")
    SCENARIOS[sys.argv[1]]()
