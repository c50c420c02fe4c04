"""Hang: a torch RPC parameter server waits for more trainers than the job has (CPU, 2 processes).

Run directly: ``python assistant/zoo/rpc_param_server.py``. The parent calls
``mp.spawn(worker, nprocs=2)``; each child joins RPC (``rpc.init_rpc``, TensorPipe). Worker 1 is the
parameter server: ``push_and_pull`` adds a trainer's gradient and waits on a ``threading.Condition``
until ``EXPECTED`` (2) trainers have pushed, but only worker 0 trains. Worker 0's
``rpc.rpc_sync("worker1", push_and_pull, ...)`` waits for a reply that never comes; the function runs
in an RPC thread of worker 1, under torch's ``_run_function``, and worker 1's main thread waits in
``rpc.shutdown()`` for worker 0.

READY (``{"pid": the parent, "rank0_pid", "rank1_pid"}``): once worker 1's RPC thread has slept in
the condition's wait and worker 0 in ``rpc_sync``, each for 5 consecutive samples.
"""

from __future__ import annotations

import os
import threading

import _common
import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

EXPECTED = 2  # the bug: the job starts one trainer


class ParameterServer:
    cond = threading.Condition()
    pushed = 0
    weights = torch.zeros(8, 1)
    waiting_tid = 0


def push_and_pull(grad: torch.Tensor) -> torch.Tensor:
    with ParameterServer.cond:
        ParameterServer.pushed += 1
        ParameterServer.weights -= 0.01 * grad
        ParameterServer.waiting_tid = threading.get_native_id()
        while ParameterServer.pushed < EXPECTED:  # waits for a second trainer that never exists
            ParameterServer.cond.wait()
        ParameterServer.pushed = 0
        ParameterServer.cond.notify_all()
        return ParameterServer.weights.clone()


def worker(rank: int, world: int) -> None:
    torch.set_num_threads(1)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world)
    if rank == 1:
        tid = lambda: ParameterServer.waiting_tid  # noqa: E731
        _common._announce_when(1, lambda: tid() > 0 and _common.sleeping_steadily(os.getpid(), tid()))
    else:
        _common._announce_when(0, _common._main_sleeps_in("rpc_sync"))
        weights = torch.zeros(8, 1)
        for step in range(1000):
            x = torch.randn(16, 8)
            weights.requires_grad_(True)
            loss = ((x @ weights - x.sum(1, keepdim=True)) ** 2).mean()
            loss.backward()
            weights = rpc.rpc_sync("worker1", push_and_pull, args=(weights.grad,))
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    rpc.shutdown()


def main() -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(_common.free_port())
    _common.ready_when_ranks_wait()
    mp.spawn(worker, args=(2,), nprocs=2, join=True)


if __name__ == "__main__":
    main()
