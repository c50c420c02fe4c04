"""Hang: one rank stalls in data loading while the other waits in a collective (cause ``collective``).

Run under the launcher, as the spawner does::

    python -m torch.distributed.run --nproc_per_node=2 --master_addr=127.0.0.1 \\
        --master_port=<free port> assistant/zoo/gloo_straggler.py

Both ranks init gloo (timeout 1 h, so nothing errors during a test), run 3 steps of
``sample -> all_reduce``, then at step 3 rank 1 stalls inside ``ShardDataset.__getitem__`` (it
sleeps for ever) while rank 0 waits in ``dist.all_reduce`` for a peer that never comes. The rank
NOT in the collective is the culprit.

Process tree: the torchrun agent (the top process; py-spy ``SimpleElasticAgent._invoke_run
(torch/distributed/elastic/agent/server/api.py)`` under ``launch_agent``, sleeping between monitor
passes) and two ranks (``python -u gloo_straggler.py``, env RANK/LOCAL_RANK/WORLD_SIZE/
MASTER_PORT/TORCHELASTIC_RUN_ID), started by the agent with ``start_new_session=True``: they are
NOT in the job's process group, and outlive a SIGKILLed agent.

py-spy, rank 0, MainThread idle, in a futex wait (gloo's work.wait; wchan ``futex_do_wait`` on
Linux 6.x, ``futex_wait_queue*`` before)::

    all_reduce (torch/distributed/distributed_c10d.py)
    _exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py)
    train (gloo_straggler.py)
    <module> (gloo_straggler.py)

py-spy, rank 1, MainThread idle, wchan ``hrtimer_nanosleep``::

    sleep_forever (_common.py)
    ShardDataset.__getitem__ (gloo_straggler.py)
    train (gloo_straggler.py)
    <module> (gloo_straggler.py)

READY (``{"pid": rank 1, "rank0_pid", "rank1_pid", "stall_step"}``): written by rank 1 from inside
``__getitem__`` (before it sleeps), once rank 0 has announced it is entering the all_reduce of the
stalled step and rank 0's main thread has been asleep for 5 consecutive samples (0.25 s).
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta

import _common
import torch
import torch.distributed as dist

STALL_STEP = 3


class ShardDataset:
    def __init__(self, rank: int):
        self.rank = rank

    def __getitem__(self, step: int) -> torch.Tensor:
        if self.rank == 1 and step == STALL_STEP:
            self._report_stall(step)
            _common.sleep_forever()  # the slow sample: never returns
        return torch.full((4,), float(step + self.rank))

    def _report_stall(self, step: int) -> None:
        def rank0_waits() -> bool:
            entering = _common.read_marker("rank0_in_all_reduce")
            return (
                bool(entering)
                and entering["step"] == step
                and _common.sleeping_steadily(entering["pid"], entering["tid"])
            )

        if _common.wait_until(rank0_waits, timeout=120):
            r0 = _common.read_marker("rank0_in_all_reduce")
            _common.mark_ready(rank0_pid=r0["pid"], rank1_pid=os.getpid(), stall_step=step)
        else:
            _common.log("zoo: rank 0 never entered the all_reduce; READY not written")


def train() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank = dist.get_rank()
    data = ShardDataset(rank)
    step = 0
    while True:
        batch = data[step]
        grad = batch * 2.0
        if rank == 0 and step == STALL_STEP:
            _common.write_marker("rank0_in_all_reduce", step=step, tid=threading.get_native_id())
        dist.all_reduce(grad)
        print(f"rank {rank} step {step} grad {grad.sum().item():.1f}", flush=True)
        step += 1


if __name__ == "__main__":
    train()
