"""Hang: two ranks a launch script started with different MASTER_PORTs (``bash -c "RANK=0
MASTER_PORT=P python port_split.py & RANK=1 MASTER_PORT=Q python port_split.py & wait"``, as the
test starts it: a port changed on one line of a copied launch script).

Rank 0 serves the c10d store at P and waits in ``init_process_group`` for rank 1; rank 1 tries to
connect to Q, where nobody listens, again and again. WORLD_SIZE=2 and MASTER_ADDR=127.0.0.1 for both
(the twelfth hunt's j20: the launcher refused as "2 unrelated jobs"; rank 0 alone: "rank 1 was never
started").

READY (``{"pid": rank 0}``), written by rank 0 once its main thread has slept in
``init_process_group`` for a few samples.
"""

from __future__ import annotations

import os
from datetime import timedelta

import _common
import torch.distributed as dist

if __name__ == "__main__":
    rank = int(os.environ["RANK"])
    print(f"rank {rank} init: MASTER_PORT={os.environ['MASTER_PORT']}", flush=True)
    if rank == 0:
        waits = _common._main_sleeps_in("init_process_group")
        _common.ready_when(waits, lambda: {"pid": os.getpid()})
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    print(f"rank {rank} joined", flush=True)
