"""Hang: an ``accelerate`` training loop that gathers a metric on the main process only (CPU, gloo,
2 ranks).

Run under the launcher, as the spawner does::

    python -m torch.distributed.run --nproc_per_node=2 --master_addr=127.0.0.1 \\
        --master_port=<free port> assistant/zoo/accelerate_gather.py

``Accelerator(cpu=True)`` reads the launcher's environment and wraps the model in DDP (gloo). At step
``GATHER_STEP`` the main process alone averages the loss across ranks::

    if step == GATHER_STEP and accelerator.is_main_process:
        losses = accelerator.gather(loss.detach().reshape(1))

Rank 0 waits in ``all_gather`` under accelerate's ``gather``; rank 1 has gone on to the next step
and waits in DDP's gradient all-reduce at the end of ``backward`` (no torch.distributed frame: the
reducer waits natively).

READY (``{"pid": rank 0, "rank0_pid", "rank1_pid"}``): written by rank 0 once both main threads have
sat in their wait for 5 consecutive samples (each rank announces ``<workdir>/waiting-<rank>`` once
it is past the gather step).
"""

from __future__ import annotations

import os
import threading

import _common
import torch
from accelerate import Accelerator

GATHER_STEP = 3
progress = {"step": 0}  # the loop's step, read by the watch thread


def announce_wait(rank: int, function: str, from_step: int) -> None:
    main = threading.main_thread()

    def waiting() -> bool:
        # from the step where the hang starts: a rank's normal short wait in backward is not it
        in_it = progress["step"] >= from_step and function in _common.stack_functions(main.ident)
        return in_it and _common.sleeping_steadily(os.getpid(), main.native_id)

    def watch() -> None:
        if not _common.wait_until(waiting, timeout=120):
            return
        _common.write_marker(f"waiting-{rank}")
        if rank == 0 and _common.wait_until(lambda: _common.read_marker("waiting-1") is not None, timeout=120):
            _common.mark_ready(rank0_pid=os.getpid(), rank1_pid=_common.read_marker("waiting-1")["pid"])

    threading.Thread(target=watch, name="zoo-ready-watch", daemon=True).start()


def main() -> None:
    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index
    if rank == 0:
        announce_wait(rank, "all_gather", GATHER_STEP)
    else:
        announce_wait(rank, "backward", GATHER_STEP + 1)
    model = torch.nn.Linear(16, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    for step in range(100):
        progress["step"] = step
        loss = model(torch.randn(8, 16)).pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        accelerator.print(f"step {step} loss {loss.item():.4f}", flush=True)
        if step == GATHER_STEP and accelerator.is_main_process:  # the bug: the main process alone
            losses = accelerator.gather(loss.detach().reshape(1))
            accelerator.print(f"mean loss {losses.mean().item():.4f}")


if __name__ == "__main__":
    main()
