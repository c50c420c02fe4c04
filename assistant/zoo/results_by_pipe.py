"""Healthy: the main process collects results over pipes from worker processes that compute for
half a minute per result (``python results_by_pipe.py``; the fifteenth hunt's h08).

Two ``multiprocessing.Process`` workers each solve linear systems with ``torch.linalg.solve`` in a
loop for 30 s, then send one result on their ``Pipe``; the main process waits in
``multiprocessing.connection.wait`` over the pipes (a poll) and logs a line per result. Between
results nothing is written and no stack moves: the workers compute in native code. It was called
HUNG (cpu-spin, a worker named the culprit).

READY (``{"pid"}``) once the main thread has slept in ``wait`` for a few samples.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from multiprocessing.connection import wait

import _common

SECONDS_PER_RESULT = 30.0


def evaluate(conn, seed: int) -> None:
    import torch

    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(seed)
    for trial in range(100):
        system = torch.randn(400, 400, generator=generator) + 400 * torch.eye(400)
        started, score = time.monotonic(), 0.0
        while time.monotonic() - started < SECONDS_PER_RESULT:
            score = torch.linalg.solve(system, torch.randn(400, generator=generator)).abs().mean().item()
        conn.send((seed, trial, score))


if __name__ == "__main__":
    ends, workers = [], []
    for seed in range(2):
        reader, writer = mp.Pipe(duplex=False)
        worker = mp.Process(target=evaluate, args=(writer, seed), name=f"hpo-worker-{seed}")
        worker.start()
        ends.append(reader)
        workers.append(worker)
    print(f"started {len(workers)} workers; collecting results", flush=True)
    _common.ready_when(_common._main_sleeps_in("wait"), lambda: {"pid": os.getpid()})
    while True:
        for ready in wait(ends):
            seed, trial, score = ready.recv()
            print(f"worker {seed} trial {trial} score {score:.5f}", flush=True)
