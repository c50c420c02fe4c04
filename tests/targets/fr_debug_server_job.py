"""Target for test_debug_server: a 2-rank gloo job that runs torch's debug server, then hangs:
rank 0 blocks in all_reduce #2, rank 1 never calls it.

    TORCH_FR_BUFFER_SIZE=2000 python fr_debug_server_job.py MASTER_PORT DEBUG_PORT

The ranks are forked (one process group, with the server's frontend process that rank 0 forks);
each sets the RANK/WORLD_SIZE/MASTER_* variables start_debug_server reads, and writes
$ZOO_WORKDIR/rank<N>.ready just before it hangs.
"""

from __future__ import annotations

import os
import sys
import threading

import torch
import torch.distributed as dist
from torch.distributed.debug import start_debug_server


def ready(rank: int) -> None:
    with open(os.path.join(os.environ["ZOO_WORKDIR"], f"rank{rank}.ready"), "w") as fh:
        fh.write("{}")


def skip_the_all_reduce() -> None:
    threading.Event().wait()


def run(rank: int, debug_port: int) -> None:
    os.environ["RANK"] = str(rank)
    dist.init_process_group("gloo")
    start_debug_server(port=debug_port)
    t = torch.ones(4)
    dist.all_reduce(t)
    ready(rank)
    if rank == 1:
        skip_the_all_reduce()
    dist.all_reduce(t)  # site:debug_server:hang


def main() -> None:
    master_port, debug_port = sys.argv[1], int(sys.argv[2])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=master_port, WORLD_SIZE="2")
    for rank in range(2):
        if os.fork() == 0:
            try:
                run(rank, debug_port)
            finally:
                os._exit(1)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            threading.Event().wait()


if __name__ == "__main__":
    main()
