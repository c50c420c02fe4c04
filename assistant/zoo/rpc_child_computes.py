"""Healthy: the trainer asks a server child of its own for rollouts through an RPC client whose I/O
runs on a library thread, and the child computes each answer for half a minute
(``python rpc_child_computes.py``; the fifteenth hunt's h06, with gRPC).

The main thread waits in ``concurrent.futures.Future.result()`` for a coroutine that asyncio's loop
runs on a thread of its own (``loop.run_forever``, no code of the job on it): the connection to the
child is watched there, not in any system call of the waiting thread. The child computes with
``torch.linalg.solve`` in a loop, then answers. It was called HUNG (cpu-spin) with a notify fix.

READY (``{"pid", "server_pid"}``) once the main thread has slept in ``result`` for a few samples.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time

import _common

SECONDS_PER_ANSWER = 30.0


def serve(port: int) -> None:
    import torch

    torch.set_num_threads(1)
    with socket.create_server(("127.0.0.1", port)) as server:
        conn, _ = server.accept()
        with conn, conn.makefile("rwb") as stream:
            for request in stream:
                started, score = time.monotonic(), 0.0
                system = torch.randn(400, 400) + 400 * torch.eye(400)
                while time.monotonic() - started < SECONDS_PER_ANSWER:
                    score = torch.linalg.solve(system, torch.randn(400)).abs().mean().item()
                stream.write(f"{request.decode().strip()} {score:.5f}\n".encode())
                stream.flush()


async def rollout(streams, step: int) -> str:
    reader, writer = streams
    writer.write(f"step {step}\n".encode())
    await writer.drain()
    return (await reader.readline()).decode().strip()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
        sys.exit(0)
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="rpc-io", daemon=True).start()
    for _ in range(100):
        try:
            streams = asyncio.run_coroutine_threadsafe(asyncio.open_connection("127.0.0.1", port), loop).result()
            break
        except OSError:
            time.sleep(0.1)
    _common.ready_when(_common._main_sleeps_in("result"), lambda: {"pid": os.getpid(), "server_pid": server.pid})
    for step in range(1000):
        answer = asyncio.run_coroutine_threadsafe(rollout(streams, step), loop).result()
        print(f"step {step} rollout {answer}", flush=True)
