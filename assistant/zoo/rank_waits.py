"""Two gloo ranks where one waits for the other, in three stages a test walks through in order.

Run under the launcher, as the spawner does (``torch.distributed.run --nproc_per_node=2``). A tiny
MLP is trained by hand (forward, backward, ``all_reduce`` of the gradients, SGD) for 2 steps, then:

1. ``eval`` (healthy): rank 0 runs a long evaluation (``evaluate_model``: batch after batch through
   the model under ``torch.no_grad``, scoring each) while rank 1 waits for it in ``dist.barrier()``.
   The evaluation ends when rank 0 gets SIGUSR1 (a real one ends when its data does); the job then
   goes on. Not hung: rank 0 computes.
2. ``spin``: at the next step rank 1 waits for a flag file that never appears, in a busy loop
   (``while not os.path.exists(flag): pass`` in ``wait_for_flag``) while rank 0 waits in
   ``all_reduce``. Creating ``<workdir>/resume.flag`` ends it.
3. ``stopped``: both ranks train on, step after step; the test SIGSTOPs rank 1 and rank 0 ends up
   waiting in ``all_reduce`` for it.

Markers in ``<workdir>``: ``READY`` (``{"pid": rank 0, "rank0_pid", "rank1_pid"}``) once rank 0 is
in its evaluation and rank 1 has slept in the barrier for 5 consecutive samples; ``SPINNING`` once
rank 1 is in its loop and rank 0 has slept in ``all_reduce`` for 5 samples; ``STOPPED`` once rank 1
is in state T and rank 0 has slept in ``all_reduce`` for 5 samples.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import timedelta

import _common
import torch
import torch.distributed as dist
from torch import nn

TRAIN_STEPS = 2


def main_thread_sleeps_in(function: str) -> bool:
    main = threading.main_thread()
    return function in _common.stack_functions(main.ident) and _common.sleeping_steadily(os.getpid(), main.native_id)


def when(predicate, then) -> None:
    def watch() -> None:
        if _common.wait_until(predicate, timeout=300):
            then()

    threading.Thread(target=watch, name="zoo-ready-watch", daemon=True).start()


def train_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float = 0.01) -> None:
    loss = nn.functional.mse_loss(model(x), y)
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        with torch.no_grad():
            p -= lr * p.grad / dist.get_world_size()


def evaluate_model(model: nn.Module, stop: threading.Event) -> float:
    """Score the model on held-out batches: long, and it logs nothing."""
    total, batches = 0.0, 0
    with torch.no_grad():
        while not stop.is_set():
            x = torch.randn(64, 256, generator=torch.Generator().manual_seed(batches))
            total += float(model(x).square().mean())
            batches += 1
    return total / max(batches, 1)


def wait_for_flag(path: str) -> None:
    while not os.path.exists(path):  # the bug: a busy loop on a file nobody writes
        pass


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank = dist.get_rank()
    if rank == 1:
        _common.write_marker("rank1")
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
    x, y = torch.randn(16, 256), torch.randn(16, 1)
    for _ in range(TRAIN_STEPS):
        train_step(model, x, y)

    stop_eval = threading.Event()
    if rank == 0:
        signal.signal(signal.SIGUSR1, lambda *_: stop_eval.set())

        def in_eval_and_rank1_waits() -> bool:
            return "evaluate_model" in _common.stack_functions(threading.main_thread().ident) and bool(
                _common.read_marker("waiting-1")
            )

        when(
            in_eval_and_rank1_waits,
            lambda: _common.mark_ready(rank0_pid=os.getpid(), rank1_pid=_common.read_marker("rank1")["pid"]),
        )
        print(f"eval score {evaluate_model(model, stop_eval):.4f}", flush=True)
    else:
        when(lambda: main_thread_sleeps_in("barrier"), lambda: _common.write_marker("waiting-1"))
    dist.barrier()

    flag = str(_common.workdir() / "resume.flag")
    if rank == 0:
        when(
            lambda: bool(_common.read_marker("spinning-1")) and main_thread_sleeps_in("all_reduce"),
            lambda: _common.write_marker("SPINNING"),
        )
    else:
        _common.write_marker("spinning-1")
        wait_for_flag(flag)
    train_step(model, x, y)

    if rank == 0:
        rank1 = _common.read_marker("rank1")["pid"]
        when(
            lambda: _common.task_state(rank1) == "T" and main_thread_sleeps_in("all_reduce"),
            lambda: _common.write_marker("STOPPED"),
        )
    else:
        _common.write_marker("training-1")
    step = TRAIN_STEPS + 1
    while True:
        train_step(model, x, y)
        step += 1
        time.sleep(0.05)


if __name__ == "__main__":
    main()
