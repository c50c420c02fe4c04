"""Hang: a training loop on ``queue.get()`` whose producer thread died of an exception.

``python producer_died.py``. A background thread (``prefetch``) reads samples and puts batches into
a ``queue.Queue(maxsize=4)``; the training loop takes them with ``batch = batches.get()`` (no
timeout). At the fourth sample the reader raises (a corrupt record): the exception ends the thread
(``threading.excepthook`` prints its traceback on stderr, the job's log), and the loop waits in
``get`` for a batch no thread will ever put.

READY (``{"pid"}``): once the producer thread is gone and the main thread has slept in ``get`` for
5 consecutive samples; the watcher thread that writes it exits right after.

``python producer_died.py process``: the producer is a ``multiprocessing.Process`` feeding a
``multiprocessing.Queue``, and it is killed by SIGKILL (what the kernel's out-of-memory killer
sends) after three batches. Nothing reaps it (``multiprocessing`` reaps only on ``join`` or
``active_children``), so it stays a zombie while the loop waits in ``get``: a job with a dead child
and no DataLoader. READY adds ``producer_pid``.

``python producer_died.py process_raises``: the producer process raises at the corrupt record instead;
``multiprocessing`` prints "Process shard-reader:" and its traceback to the job's log, and it exits with
code 1.

``python producer_died.py tqdm``: the same, with a tqdm progress bar, whose monitor thread (tqdm's
``TMonitor``) sleeps beside the main thread: a thread of a library that puts nothing in the job's queue.

``python producer_died.py heartbeat``: the same, beside a heartbeat thread of the job's own that logs
every few seconds (as an RPC server's threads stay beside a dead prefetcher, the twelfth hunt's j09):
a thread is left, so "no thread is left" cannot be said; the log names the thread that died.

``python producer_died.py asyncio``: the same pipeline in asyncio. A producer task puts records in an
``asyncio.Queue`` and raises at the corrupt one; the training coroutine awaits ``queue.get()``. The
task's exception is kept until the task is awaited (the program still holds it: nothing is logged),
and the event loop idles in ``epoll_wait`` with no timeout, nothing but its own wakeup socket to watch.

``python producer_died.py socketpair``: the prefetch thread sends pickled batches over one end of a
``socket.socketpair()`` and the loop reads them from the other (``sock.recv``, no timeout); the thread
raises at the corrupt record. The socket's other end is the process's own, and no thread is left to
write to it (the ninth hunt's h07, read as an external service 93%).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import signal
import socket
import struct
import sys
import threading
import time

import _common

CORRUPT_AT = 3


def read_sample(index: int) -> list:
    if index == CORRUPT_AT:
        raise ValueError(f"record {index}: unexpected end of data (corrupt shard)")
    return [float(index)] * 8


def prefetch(batches: queue.Queue) -> None:
    index = 0
    while True:
        batches.put(read_sample(index))
        index += 1


def start_prefetch(target, channel) -> threading.Thread:
    producer = threading.Thread(target=target, args=(channel,), name="prefetch", daemon=True)
    producer.start()
    return producer


def ready_once_alone(producer: threading.Thread, waits_in: str) -> None:
    """READY once the producer thread is gone and the main thread has slept in `waits_in` steadily."""
    main = threading.main_thread()

    def waiting_alone() -> bool:
        waiting = waits_in in _common.stack_functions(main.ident)
        return not producer.is_alive() and waiting and _common.sleeping_steadily(os.getpid(), main.native_id)

    _common.ready_when(waiting_alone)


def heartbeat() -> None:
    while True:
        time.sleep(30)
        print("heartbeat", flush=True)


def train() -> None:
    batches: queue.Queue = queue.Queue(maxsize=4)
    ready_once_alone(start_prefetch(prefetch, batches), "get")
    progress = None
    if sys.argv[1:] == ["heartbeat"]:
        threading.Thread(target=heartbeat, name="heartbeat", daemon=True).start()
    if sys.argv[1:] == ["tqdm"]:
        from tqdm import tqdm

        progress = tqdm(desc="train", mininterval=0.1)  # starts tqdm's monitor thread (TMonitor)
    step = 0
    while True:
        batch = batches.get()  # no timeout: the bug
        step += 1
        print(f"step {step} loss {sum(batch) / len(batch):.3f}", flush=True)
        if progress is not None:
            progress.update()


def produce_then_die(batches) -> None:
    for index in range(CORRUPT_AT):
        batches.put(read_sample(index))
    time.sleep(0.5)  # the queue's feeder thread flushes the three batches
    os.kill(os.getpid(), signal.SIGKILL)


def produce_then_raise(batches) -> None:
    index = 0
    while True:
        batches.put(read_sample(index))  # raises at the corrupt record: multiprocessing prints it, exit code 1
        index += 1
        if index == CORRUPT_AT:
            time.sleep(0.5)  # the queue's feeder thread flushes the three batches


def train_from_process(producer_target=produce_then_die) -> None:
    batches = multiprocessing.Queue(maxsize=4)
    producer = multiprocessing.Process(target=producer_target, args=(batches,), name="shard-reader")
    producer.start()
    main = threading.main_thread()

    def waiting_on_the_dead() -> bool:
        dead = _common.task_state(producer.pid) == "Z"
        in_get = "get" in _common.stack_functions(main.ident)
        return dead and in_get and _common.sleeping_steadily(os.getpid(), main.native_id)

    _common.ready_when(waiting_on_the_dead, lambda: {"producer_pid": producer.pid})
    step = 0
    while True:
        batch = batches.get()  # no timeout: the bug
        step += 1
        print(f"step {step} loss {sum(batch) / len(batch):.3f}", flush=True)


def send_batches(sender: socket.socket) -> None:
    index = 0
    while True:
        data = pickle.dumps(read_sample(index))  # raises at the corrupt record: the thread ends
        sender.sendall(struct.pack("!I", len(data)) + data)
        index += 1


def receive_exactly(receiver: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        data += receiver.recv(size - len(data))  # no timeout: the bug
    return data


def train_from_socket() -> None:
    receiver, sender = socket.socketpair()
    ready_once_alone(start_prefetch(send_batches, sender), "receive_exactly")
    step = 0
    while True:
        (size,) = struct.unpack("!I", receive_exactly(receiver, 4))
        batch = pickle.loads(receive_exactly(receiver, size))
        step += 1
        print(f"step {step} loss {sum(batch) / len(batch):.3f}", flush=True)


async def produce_records(batches) -> None:
    index = 0
    while True:
        await batches.put(read_sample(index))
        index += 1


async def train_on_records() -> None:
    import asyncio

    batches: asyncio.Queue = asyncio.Queue(maxsize=4)
    producer = asyncio.create_task(produce_records(batches), name="producer")
    main = threading.main_thread()

    def idle_in_the_loop() -> bool:
        in_select = "select" in _common.stack_functions(main.ident)
        return producer.done() and in_select and _common.sleeping_steadily(os.getpid(), main.native_id)

    _common.ready_when(idle_in_the_loop)
    step = 0
    while True:
        batch = await batches.get()  # no timeout: the bug
        step += 1
        print(f"step {step} loss {sum(batch) / len(batch):.3f}", flush=True)


ckpt_lock = threading.Lock()


def async_save(step: int) -> None:
    ckpt_lock.acquire()  # the slip: released by a later line, not by a `with`
    read_sample(CORRUPT_AT)  # the upload fails: the thread dies holding the lock
    ckpt_lock.release()


def train_with_saver() -> None:
    """lock_leaked: a checkpoint thread takes ckpt_lock with acquire() and dies of an error before its
    release(); the training step waits in `with ckpt_lock:` (the sixteenth hunt's j01)."""
    saver = threading.Thread(target=async_save, args=(0,), name="ckpt-saver", daemon=True)
    saver.start()
    saver.join()
    ready_once_alone(saver, "train_with_saver")
    for step in range(100):
        with ckpt_lock:  # the optimizer step, kept out of a save
            print(f"step {step}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["asyncio"]:
        import asyncio

        asyncio.run(train_on_records())
    else:
        scenarios = {
            "process": train_from_process,
            "process_raises": lambda: train_from_process(produce_then_raise),
            "socketpair": train_from_socket,
            "lock_leaked": train_with_saver,
        }
        scenarios.get(sys.argv[1] if sys.argv[1:] else "", train)()
