"""Hang: rendezvous waits for a rank that was never launched (cause ``rendezvous``).

No launcher: ``RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=<free port> python
rendezvous_missing_rank.py`` (the spawner sets these; run by hand, defaults are filled in and a free
port is picked). Rank 0 hosts the TCPStore and waits, with a 1 h timeout, for rank 1, which never
starts. ~0% CPU; the process listens on MASTER_PORT.

py-spy, MainThread idle::

    _create_c10d_store (torch/distributed/rendezvous.py)
    _env_rendezvous_handler (torch/distributed/rendezvous.py)
    init_process_group (torch/distributed/distributed_c10d.py)
    _time_logger.<locals>.wrapper (torch/distributed/c10d_logger.py)
    _exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py)
    main (rendezvous_missing_rank.py)
    <module> (rendezvous_missing_rank.py)

With ``--native`` the top is ``c10d::TCPStore::waitForWorkers`` -> ``c10d::TCPStore::TCPStore``
(libtorch_cpu.so) -> ``nanosleep``.

READY (``{"pid", "master_port", "world_size"}``): a helper thread (it exits right after) writes it
once the main thread's Python stack holds ``_create_c10d_store`` and the process listens on
MASTER_PORT.
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta

import _common
import psutil
import torch.distributed as dist


def main() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_common.free_port()))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "2")
    port = int(os.environ["MASTER_PORT"])
    main_thread = threading.main_thread()

    def waiting_for_peer() -> bool:
        if "_create_c10d_store" not in _common.stack_functions(main_thread.ident):
            return False
        proc = psutil.Process()
        conns = proc.net_connections("tcp") if hasattr(proc, "net_connections") else proc.connections("tcp")
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns)

    _common.ready_when(waiting_for_peer, lambda: {"master_port": port, "world_size": os.environ["WORLD_SIZE"]})
    print(f"rank {os.environ['RANK']}: init_process_group on port {port}", flush=True)
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    print("initialized (should never happen)", flush=True)


if __name__ == "__main__":
    main()
