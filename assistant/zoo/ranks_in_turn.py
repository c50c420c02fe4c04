"""Hang: a hand-written launcher starts its ranks one after another (``python ranks_in_turn.py``).

The launcher runs ``subprocess.run([python, ranks_in_turn.py, "--rank", R])`` in a loop over the
ranks: ``run`` returns only when its child exits, so rank 1 is started only after rank 0 ends, and
rank 0 waits in ``init_process_group`` (gloo, world_size=2) for rank 1 for ever (the fourteenth
hunt's j23, whose fix said only "this machine runs 1 rank of 2").

READY (``{"pid": launcher, "rank0_pid"}``): written by rank 0 once it has slept in the rendezvous
for a few samples.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import timedelta

import _common


def rank_main(rank: int, port: int) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    print(f"rank {rank}: joining the process group", flush=True)
    if rank == 0:
        launcher = os.getppid()
        _common.ready_when(
            _common._main_sleeps_in("_create_c10d_store"), lambda: {"pid": launcher, "rank0_pid": os.getpid()}
        )
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    print(f"rank {rank}: ready", flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), int(sys.argv[4]))
        sys.exit(0)
    port = free_port()
    for rank in range(2):
        subprocess.run([sys.executable, __file__, "--rank", str(rank), "--port", str(port)], check=True)
