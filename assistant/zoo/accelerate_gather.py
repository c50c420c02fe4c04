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

import _common
import torch
from accelerate import Accelerator

GATHER_STEP = 3
progress = {"step": 0}  # the loop's step, read by the watch thread


def main() -> None:
    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index
    # from the step where the hang starts: a rank's normal short wait in backward is not it
    from_step = GATHER_STEP if rank == 0 else GATHER_STEP + 1
    _common.announce_rank_wait(rank, "all_gather" if rank == 0 else "backward", lambda: progress["step"] >= from_step)
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
