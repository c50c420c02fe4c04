"""Hang: rank 1 raises, but cannot exit: Python's exit waits for its non-daemon thread, idle on a
queue; rank 0 waits for it in ``all_reduce`` (gloo, CPU).

``python rank_exit_thread.py``. A launch script starts two ranks with ``subprocess.Popen`` and
``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT`` in their environment (``env://``), as
hand-written launchers do, and waits for them; it takes no part in the job. Each rank starts a
"metrics-uploader" thread (not a daemon) that takes items from a ``queue.Queue``; at step 2 rank 1
raises ``ValueError``. Its traceback is printed, its main code has ended, and ``threading._shutdown``
waits for the uploader, idle in ``Queue.get`` for ever. Its sockets stay open, so rank 0 waits in
the next ``all_reduce`` (gloo's timeout is set to an hour).

READY (``{"pid": rank 0, "rank0_pid", "rank1_pid"}``): once rank 0 has slept in ``all_reduce`` and
rank 1 in ``_shutdown`` for 5 consecutive samples each.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
from datetime import timedelta

import _common

FAIL_STEP = 2


def rank_main() -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    rank = dist.get_rank()
    metrics: queue.Queue = queue.Queue()

    def upload() -> None:
        while True:
            metrics.get()  # a real uploader would send it somewhere

    threading.Thread(target=upload, name="metrics-uploader").start()
    _common.announce_rank_wait(rank, "_shutdown" if rank == 1 else "all_reduce")
    grad = torch.ones(4)
    for step in range(100):
        print(f"[rank{rank}] step {step} loss 0.5", flush=True)
        metrics.put(step)
        if rank == 1 and step == FAIL_STEP:
            raise ValueError("NaN in labels of batch 2")
        dist.all_reduce(grad)


def main() -> None:
    _common.workdir()
    with socket.socket() as probe:  # a free port for the store; rank 0 binds it a moment later
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ranks = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        ranks.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank"], env=env))
    for proc in ranks:
        proc.wait()


if __name__ == "__main__":
    if sys.argv[1:] == ["--rank"]:
        rank_main()
    else:
        main()
