"""Hang: a job's own launcher script starts its ranks, and rank 1 never reaches the collective
(cause ``collective``, culprit rank 1).

``python script_launcher.py``. No torchrun, mpirun or srun: the script starts itself once per rank
with ``subprocess.Popen([python, script_launcher.py, "--rank", R, "--port", P])`` and waits for them,
as hand-written launchers, notebooks and JAX's multi-process examples do. The ranks learn their rank
from the command line only (``init_process_group(init_method="tcp://127.0.0.1:P", rank=R,
world_size=2)``): no RANK or WORLD_SIZE in any environment, so nothing but the stacks says which
processes are ranks. Both run 3 steps of ``all_reduce``; then rank 1 goes into an "evaluation" of
its own that never ends (it sleeps in its own code) while rank 0 waits in ``dist.all_reduce``.

Process tree: the launcher (py-spy ``main (script_launcher.py)`` in ``Popen.wait``) and two ranks.

py-spy, rank 0, MainThread idle::

    all_reduce (torch/distributed/distributed_c10d.py)
    ...
    rank_main (script_launcher.py)

py-spy, rank 1, MainThread idle, wchan ``hrtimer_nanosleep``::

    sleep_forever (_common.py)
    evaluate (script_launcher.py)
    rank_main (script_launcher.py)

READY (``{"pid": rank 1, "launcher_pid", "rank0_pid", "rank1_pid"}``): written by rank 1 once rank 0
has announced the all_reduce of the step it never joins and has slept there for 5 samples.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from datetime import timedelta

import _common

STEPS = 3


def evaluate(rank0: dict) -> None:
    if _common.wait_until(lambda: _common.sleeping_steadily(rank0["pid"], rank0["tid"]), timeout=120):
        _common.mark_ready(launcher_pid=os.getppid(), rank0_pid=rank0["pid"], rank1_pid=os.getpid())
    else:
        _common.log("zoo: rank 0 never slept in the all_reduce; READY not written")
    _common.sleep_forever()  # the pass that never ends, outside any collective


def rank_main(rank: int, port: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(hours=1)
    )
    grad = torch.ones(4)
    for step in range(STEPS):
        dist.all_reduce(grad)
        print(f"rank {rank} step {step}", flush=True)
    if rank == 1:
        if _common.wait_until(lambda: _common.read_marker("rank0_in_all_reduce") is not None, timeout=120):
            evaluate(_common.read_marker("rank0_in_all_reduce"))  # never returns
        else:
            _common.log("zoo: rank 0 never announced its all_reduce; READY not written")
            _common.sleep_forever()
    _common.write_marker("rank0_in_all_reduce", tid=threading.get_native_id())
    dist.all_reduce(grad)  # the hang: rank 1 never comes


def main() -> None:
    _common.workdir()
    with socket.socket() as probe:  # a free port for the store; rank 0 binds it a moment later
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ranks = [
        subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(r), "--port", str(port)])
        for r in range(2)
    ]
    for proc in ranks:
        proc.wait()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), int(sys.argv[4]))
    else:
        main()
