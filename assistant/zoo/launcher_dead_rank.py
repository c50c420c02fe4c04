"""Hang: a rank crashed before the rendezvous; the other waits for it (cause ``rendezvous``).

``python launcher_dead_rank.py``: the job's own launcher script (as an sbatch wrapper would) starts two
ranks with ``subprocess.Popen``, RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT in their environment,
then waits for rank 0. Rank 1 fails to open its data shard (``FileNotFoundError``) before
``init_process_group`` and exits; nothing reaps it, so it stays a zombie with no command line or
environment left to read. Rank 0 hosts the TCPStore and waits, with a 1 h timeout, for a rank that
is gone.

READY (``{"pid", "rank0_pid", "rank1_pid", "master_port"}``): once rank 1 is a zombie and rank 0
listens on MASTER_PORT inside ``init_process_group``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import _common
import psutil

RANK = r"""
import os, sys
from datetime import timedelta
import torch.distributed as dist
if os.environ["RANK"] == "1":
    open(os.path.join(sys.argv[1], "train-00001-of-00002.bin"), "rb")  # the shard is missing
dist.init_process_group("gloo", timeout=timedelta(hours=1))
"""


def main() -> None:
    port = _common.free_port()
    shards = str(_common.workdir() / "shards")
    ranks = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env["GLOO_SOCKET_IFNAME"] = "lo"
        ranks.append(subprocess.Popen([sys.executable, "-I", "-c", RANK, shards], env=env))

    def rank0_waits_for_a_dead_rank() -> bool:
        try:
            dead = psutil.Process(ranks[1].pid).status() == psutil.STATUS_ZOMBIE
            conns = psutil.Process(ranks[0].pid).net_connections("tcp")
        except psutil.Error:
            return False
        return dead and any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns)

    _common.ready_when(
        rank0_waits_for_a_dead_rank,
        lambda: {"rank0_pid": ranks[0].pid, "rank1_pid": ranks[1].pid, "master_port": port},
    )
    ranks[0].wait()  # the launcher waits for its ranks in order; rank 1 is never reaped


if __name__ == "__main__":
    main()
