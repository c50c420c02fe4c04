"""Target for test_probe_nccl: a tiny torchrun + gloo job (CPU), run as `probe_ddp.py MODE`.

healthy   both ranks init gloo, run three all_reduces and exit 0.
missing   both ranks claim WORLD_SIZE=3: they publish their addresses in the c10d store and wait,
          for ever, for rank 2's, which nobody ever starts (a stall in the rendezvous).
mismatch  rank 0 calls all_reduce while rank 1 calls broadcast; TORCH_DISTRIBUTED_DEBUG=DETAIL
          detects the mismatch and both ranks raise.
crash     rank 1 raises ValueError after the first all_reduce; rank 0 waits for it in the next one.
skip      rank 1 never enters the second all_reduce (it waits on an Event for ever); rank 0 does,
          and waits there: a real collective hang.
killed    rank 1 is SIGKILLed (as by the OOM killer) after the first all_reduce.
The process-group timeout is an hour, so nothing gives up on its own during a test.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "healthy"
    torch.set_num_threads(1)
    if mode == "missing":
        os.environ["WORLD_SIZE"] = "3"
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank = dist.get_rank()
    tensor = torch.ones(4)
    for step in range(3):
        if mode == "crash" and rank == 1 and step == 1:
            raise ValueError("bad batch at step 1")
        if mode == "skip" and rank == 1 and step == 1:
            threading.Event().wait()
        if mode == "killed" and rank == 1 and step == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "mismatch" and rank == 1:
            dist.broadcast(tensor, src=0)
        else:
            dist.all_reduce(tensor)
        print(f"rank {rank} step {step} sum {tensor.sum().item():.0f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
