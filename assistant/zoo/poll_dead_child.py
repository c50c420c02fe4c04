"""Hang: the trainer polls for a shard's ``.done`` marker that its builder child would have written,
but the child crashed first (cause ``thread-deadlock``: waiting for a process that is gone).

``python poll_dead_child.py``. A ``multiprocessing`` child (``shard-builder``) builds the next shard and
raises an ``IndexError`` before it writes the marker; nothing reaps it, so it stays a zombie with exit
code 1, while the trainer sleeps in ``while not os.path.exists(done): time.sleep(1)`` (the eleventh
hunt's j20: no cause named, the zombie and its traceback not connected to the loop).

``python poll_dead_child.py accept``: the trainer serves parameters on a ``multiprocessing.connection``
``Listener`` and waits in ``accept()`` for its actor child, which raises (a missing config file) before
it connects (the twelfth hunt's j24: no cause named, the dead client not named).

``python poll_dead_child.py sigwait``: the trainer blocks SIGUSR1 and waits for it in
``signal.sigwait`` from a staging helper child, which raises (a missing config key) before it sends
it (the thirteenth hunt's j23: no cause named, "Compile in-process" first).

``python poll_dead_child.py counter``: the trainer polls a shared sequence number (``while
seq.value == seen: time.sleep(0.001)``, a ``multiprocessing.Value``) that its decoder child bumps for
each batch; the decoder raises on a truncated record (the fifteenth hunt's j20, with shared memory:
no cause named, the dead decoder not connected to the loop).

READY (``{"pid", "child_pid"}``): once the child is a zombie and the trainer has slept for 5 samples.
"""

from __future__ import annotations

import multiprocessing
import os
import time

import _common


def build_shard(done: str, size: int) -> None:
    rows = list(range(size))
    rows[size + 5]  # IndexError: the builder dies before its marker
    open(done, "w").close()


def main() -> None:
    done = str(_common.workdir() / "shard1.done")
    builder = multiprocessing.get_context("fork").Process(target=build_shard, args=(done, 1000), name="shard-builder")
    builder.start()
    _common.ready_when(
        lambda: _common.task_state(builder.pid) == "Z" and _common.sleeping_steadily(os.getpid()),
        lambda: {"child_pid": builder.pid},
    )
    print("epoch 0 done; waiting for shard 1", flush=True)
    while not os.path.exists(done):
        time.sleep(1)
    print("shard 1 ready", flush=True)


def actor(address, config: str) -> None:
    from multiprocessing.connection import Client

    with open(config) as f:  # FileNotFoundError: the actor dies before it connects
        settings = f.read()
    Client(address, authkey=b"zoo").send(settings)


def serve() -> None:
    from multiprocessing.connection import Listener

    listener = Listener(("127.0.0.1", 0), authkey=b"zoo")
    config = str(_common.workdir() / "actor_config.json")
    child = multiprocessing.get_context("fork").Process(target=actor, args=(listener.address, config), name="actor-0")
    child.start()
    _common.ready_when(
        lambda: _common.task_state(child.pid) == "Z" and _common.sleeping_steadily(os.getpid()),
        lambda: {"child_pid": child.pid},
    )
    print("waiting for actor-0 to connect", flush=True)
    conn = listener.accept()
    print("actor connected", conn.recv(), flush=True)


def notify_ready(parent: int, config: dict) -> None:
    import signal

    config["staging_dir"]  # KeyError: the helper dies before it signals
    os.kill(parent, signal.SIGUSR1)


def wait_for_signal() -> None:
    import signal

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=notify_ready, args=(os.getpid(), {"stage_dir": "/tmp"}), name="stager")
    child.start()
    _common.ready_when(
        lambda: _common.task_state(child.pid) == "Z" and _common.sleeping_steadily(os.getpid()),
        lambda: {"child_pid": child.pid},
    )
    print("waiting for the stager's signal", flush=True)
    signal.sigwait({signal.SIGUSR1})
    print("staged", flush=True)


def decode(seq, batches: int) -> None:
    for index in range(batches):
        record = b"\x00" * (4 * 128 - (3 if index == 7 else 0))
        if len(record) % 4:
            raise ValueError(f"record {index}: buffer size must be a multiple of element size")
        with seq.get_lock():
            seq.value += 1
        time.sleep(0.05)


def poll_counter() -> None:
    seq = multiprocessing.Value("q", 0)
    decoder = multiprocessing.get_context("fork").Process(target=decode, args=(seq, 1000), name="decoder")
    decoder.start()
    _common.ready_when(
        lambda: _common.task_state(decoder.pid) == "Z" and _common.sleeping_steadily(os.getpid()),
        lambda: {"child_pid": decoder.pid},
    )
    seen = 0
    for step in range(1000):
        while seq.value == seen:
            time.sleep(0.001)
        seen = seq.value
        print(f"step {step} batch {seen}", flush=True)


if __name__ == "__main__":
    import sys

    scenarios = {"accept": serve, "sigwait": wait_for_signal, "counter": poll_counter}
    scenarios.get(sys.argv[1] if sys.argv[1:] else "", main)()
