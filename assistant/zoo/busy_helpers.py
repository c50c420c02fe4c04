"""A main thread waits on helpers that work; one scenario per argument (``busy_helpers.py <scenario>``).

- ``threads``: not hung. ``ThreadPoolExecutor(2)`` runs CPU-heavy tasks of a minute each (pure
  Python, a preprocessing stand-in); the main thread waits in ``Future.result``, both worker threads
  compute in ``preprocess`` (taking turns at the GIL).
- ``threads_stuck``: hung. Task 0 never ends (the same work, with a condition that never holds);
  tasks 1-3 end at once, so the other worker idles in its queue's get while the main thread waits
  for task 0's result.
- ``pool_imap``: not hung. ``multiprocessing.Pool(2).imap`` over tasks of a minute each; the main
  thread waits in ``IMapIterator.next`` (a Condition), both pool workers compute in ``preprocess``.
- ``prefetch_thread``: not hung. A background thread of the job's own (``threading.Thread``, named
  ``prefetcher``) prepares each batch with a minute of CPU and puts it on a ``queue.Queue``; the main
  thread waits in the queue's ``get``.
- ``child_computes``: not hung. ``subprocess`` child that computes for ten minutes and writes nothing
  (a preprocessing step run as a script); the main thread waits for it in ``_try_wait``.
- ``asyncio_child``: not hung. An asyncio trainer runs its evaluation as a child
  (``asyncio.create_subprocess_exec``, stdout a pipe) that computes for ten minutes and awaits
  ``proc.communicate()``: the loop waits in its selector on the child's pipe, no subprocess frame
  (the twelfth hunt's h06, called hung: "keeps running, never waiting").
- ``socket_child``: not hung. An evaluator child connects back over TCP and computes for ten minutes
  before it sends its scores (one line); the main thread waits in ``readline`` on the connection
  (the thirteenth hunt's h06, a child that streams a line every 2 s: called hung, "the peer never
  answers (running)").
- ``lock_holder_computes``: not hung. A preprocessing child takes an exclusive ``flock`` on
  ``<workdir>/cache.lock`` and computes for ten minutes (building the cache the lock guards); the
  main thread waits in a blocking ``fcntl.flock`` on the same file (the thirteenth hunt's h07: called
  hung, io-stall 93%).
- ``mp_child_computes``: not hung. A held-out evaluation run in a ``multiprocessing`` spawn child
  (``Process(name="evaluator")``) that multiplies torch matrices for ten minutes (native code, the
  stack still); the main thread waits for it in ``Process.join``.
- ``child_writes``: not hung. ``subprocess.run`` of a child that writes 1 MiB to
  ``<workdir>/extracted.bin`` every 0.25 s for ever (an extraction or a conversion); the main thread
  waits for the child in ``_try_wait``.
- ``join_blas``: not hung. A feature-extraction thread multiplies numpy matrices for ten minutes (BLAS,
  the GIL released); the main thread waits for it in ``Thread.join``.
- ``polls_child``: not hung. The main thread starts an evaluator child that computes for ten minutes
  (then would write its scores), and polls for the scores file with ``time.sleep(5)`` between looks.
- ``polls_service``: not hung. The main thread fetches its next batch from a feature service (a child
  running ``http.server`` with HTTP/1.1 keep-alive) that answers ``503`` with ``Retry-After: 1`` while
  it warms up; the client honours it with ``time.sleep`` and asks again on the same connection.

READY (``{"pid", "scenario", "child"}``): written by a helper thread once the main thread has slept in
its wait for a few consecutive samples and the helpers are at work (both tasks started; tasks 1-3
done and the idle worker asleep; the child's file past 1 MiB).
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import threading
import time

import _common

SCENARIO = sys.argv[1] if len(sys.argv) > 1 else "threads"
TASK_SECONDS = 60.0
CHILD = r"""
import sys, time
with open(sys.argv[1], "wb") as f:
    while True:
        f.write(b"x" * (1 << 20))
        f.flush()
        time.sleep(0.25)
"""

CHILD_COMPUTES = r"""
import sys, time
open(sys.argv[1], "w").close()
started, total = time.monotonic(), 0
while time.monotonic() - started < 600:
    total += sum(k * k for k in range(1000))
"""
CHILD_SENDS = r"""
import socket, sys, time
conn = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
open(sys.argv[1], "w").close()
started, total = time.monotonic(), 0
while time.monotonic() - started < 600:
    total += sum(k * k for k in range(1000))
conn.sendall(f"{total}\\n".encode())
"""
CHILD_LOCKS = r"""
import fcntl, sys, time
lock = open(sys.argv[2], "a")
fcntl.flock(lock, fcntl.LOCK_EX)
open(sys.argv[1], "w").close()
started, total = time.monotonic(), 0
while time.monotonic() - started < 600:
    total += sum(k * k for k in range(1000))
"""
WARMING_SERVICE = r"""
import http.server, sys
class Warming(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client's connection stays open between calls
    def log_message(self, *args): pass
    def do_GET(self):
        self.send_response(503); self.send_header("Retry-After", "1"); self.send_header("Content-Length", "0")
        self.end_headers()
server = http.server.HTTPServer(("127.0.0.1", 0), Warming)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
SCENARIOS = (
    "threads", "threads_stuck", "pool_imap", "prefetch_thread", "child_computes", "child_writes", "join_blas",
    "polls_child", "polls_service", "mp_child_computes", "asyncio_child", "socket_child",
    "lock_holder_computes",
)  # fmt: skip


def preprocess(index: int) -> int:
    _common.write_marker(f"task-{index}")
    if SCENARIO == "threads_stuck" and index > 0:
        return index
    limit = float("inf") if SCENARIO == "threads_stuck" else TASK_SECONDS
    started, total = time.monotonic(), 0
    while time.monotonic() - started < limit:
        for k in range(5000):
            total += (k * index) % 7
    return total


def pool_jobs() -> None:
    waits = _common._main_sleeps_in("result")
    done = []

    def reached() -> bool:
        if SCENARIO == "threads":
            return all((_common.workdir() / f"task-{i}").exists() for i in (0, 1)) and waits()
        idle = [t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor") and t.native_id != busy[0]]
        asleep = idle and all(_common.sleeping_steadily(os.getpid(), t.native_id) for t in idle)
        return len(done) == 3 and asleep and waits()

    busy = []
    _common.ready_when(reached, lambda: {"pid": os.getpid(), "scenario": SCENARIO})
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(preprocess, i) for i in range(4)]
        if SCENARIO == "threads_stuck":
            _common.wait_until(lambda: (_common.workdir() / "task-0").exists(), timeout=60)
            busy.append(next(t.native_id for t in threading.enumerate() if t.name.endswith("_0")))
            for future in futures[1:]:
                future.result()
                done.append(future)
        print(sum(f.result() for f in futures), flush=True)


def pool_imap() -> None:
    import multiprocessing

    waits = _common._main_sleeps_in("next")

    def reached() -> bool:
        return all((_common.workdir() / f"task-{i}").exists() for i in (0, 1)) and waits()

    _common.ready_when(reached, lambda: {"pid": os.getpid(), "scenario": SCENARIO})
    with multiprocessing.get_context("fork").Pool(2) as pool:
        for total in pool.imap(preprocess, range(4)):
            print(total, flush=True)


def prefetch_thread() -> None:
    import queue

    batches: queue.Queue = queue.Queue(maxsize=2)

    def prefetch() -> None:
        for index in range(100):
            batches.put(preprocess(index))

    waits = _common._main_sleeps_in("get")
    _common.ready_when(
        lambda: (_common.workdir() / "task-0").exists() and waits(), lambda: {"pid": os.getpid(), "scenario": SCENARIO}
    )
    threading.Thread(target=prefetch, name="prefetcher", daemon=True).start()
    for step in range(100):
        print(f"step {step}: {batches.get()}", flush=True)


def child_computes() -> None:
    started = _common.workdir() / "child-started"
    child = subprocess.Popen([sys.executable, "-I", "-c", CHILD_COMPUTES, str(started)])
    waits = _common._main_sleeps_in("_try_wait")
    _common.ready_when(
        lambda: started.exists() and waits(), lambda: {"pid": os.getpid(), "scenario": SCENARIO, "child": child.pid}
    )
    print("preprocessing the dataset", flush=True)
    child.wait()


def asyncio_child() -> None:
    import asyncio

    started = _common.workdir() / "child-started"

    async def run_eval() -> bytes:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-c", CHILD_COMPUTES, str(started), stdout=asyncio.subprocess.PIPE
        )
        waits = _common._main_sleeps_in("select")
        _common.ready_when(
            lambda: started.exists() and waits(),
            lambda: {"pid": os.getpid(), "scenario": SCENARIO, "child": child.pid},
        )
        out, _ = await child.communicate()
        return out

    print("running the offline metric in a child", flush=True)
    asyncio.run(run_eval())


def socket_child() -> None:
    import socket

    started = _common.workdir() / "child-started"
    server = socket.create_server(("127.0.0.1", 0))
    port = str(server.getsockname()[1])
    child = subprocess.Popen([sys.executable, "-I", "-c", CHILD_SENDS, str(started), port])
    conn, _ = server.accept()
    waits = _common._main_sleeps_in("readinto")
    _common.ready_when(
        lambda: started.exists() and waits(), lambda: {"pid": os.getpid(), "scenario": SCENARIO, "child": child.pid}
    )
    print("scoring the held-out set in a child", flush=True)
    print(conn.makefile().readline(), flush=True)


def lock_holder_computes() -> None:
    import fcntl

    started, path = _common.workdir() / "child-started", _common.workdir() / "cache.lock"
    child = subprocess.Popen([sys.executable, "-I", "-c", CHILD_LOCKS, str(started), str(path)])
    while not started.exists():
        time.sleep(0.05)
    waits = _common._main_sleeps_in("lock_holder_computes")
    _common.ready_when(waits, lambda: {"pid": os.getpid(), "scenario": SCENARIO, "child": child.pid})
    print("waiting for the cache lock", flush=True)
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the child builds the cache under it


def evaluate(started: str) -> None:
    import torch

    torch.set_num_threads(1)
    weights = torch.randn(1024, 1024)
    open(started, "w").close()
    deadline = time.monotonic() + TASK_SECONDS * 10
    while time.monotonic() < deadline:
        torch.randn(512, 1024) @ weights


def mp_child_computes() -> None:
    import multiprocessing

    started = _common.workdir() / "child-started"
    child = multiprocessing.get_context("spawn").Process(target=evaluate, args=(str(started),), name="evaluator")
    child.start()
    waits = _common._main_sleeps_in("poll")
    _common.ready_when(
        lambda: started.exists() and waits(), lambda: {"pid": os.getpid(), "scenario": SCENARIO, "child": child.pid}
    )
    print("held-out evaluation in a fresh process", flush=True)
    child.join()


def child_writes() -> None:
    target = _common.workdir() / "extracted.bin"
    child = subprocess.Popen([sys.executable, "-I", "-c", CHILD, str(target)])
    waits = _common._main_sleeps_in("_try_wait")

    def reached() -> bool:
        return target.exists() and target.stat().st_size > (1 << 20) and waits()

    _common.ready_when(reached, lambda: {"pid": os.getpid(), "scenario": SCENARIO, "child": child.pid})
    print("extracting the dataset", flush=True)
    child.wait()


def join_blas() -> None:
    import numpy as np

    def extract() -> None:
        _common.write_marker("task-0")
        a = np.random.default_rng(0).standard_normal((1200, 1200))
        started = time.monotonic()
        while time.monotonic() - started < 600:
            b = a @ a.T
            a = b / np.linalg.norm(b)

    waits = _common._main_sleeps_in("join")
    _common.ready_when(
        lambda: (_common.workdir() / "task-0").exists() and waits(), lambda: {"pid": os.getpid(), "scenario": SCENARIO}
    )
    worker = threading.Thread(target=extract, name="feature-extractor")
    worker.start()
    worker.join()


def polls_child() -> None:
    started = _common.workdir() / "child-started"
    scores = _common.workdir() / "scores.json"
    child = subprocess.Popen([sys.executable, "-I", "-c", CHILD_COMPUTES, str(started)])

    def wait_for_scores() -> None:
        while not scores.exists():
            time.sleep(5)

    waits = _common._main_sleeps_in("wait_for_scores")
    _common.ready_when(
        lambda: started.exists() and waits(), lambda: {"pid": os.getpid(), "scenario": SCENARIO, "child": child.pid}
    )
    print(f"evaluator pid {child.pid} started; waiting for {scores}", flush=True)
    wait_for_scores()


def polls_service() -> None:
    import http.client

    service, port = _common.start_server_child(WARMING_SERVICE)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def fetch_batch(step: int) -> bytes:
        while True:
            connection.request("GET", f"/batch/{step}")
            response = connection.getresponse()
            body = response.read()
            if response.status == 200:
                return body
            time.sleep(float(response.getheader("Retry-After", "1")))  # a busy service: back off, ask again

    waits = _common._main_sleeps_in("fetch_batch")
    _common.ready_when(waits, lambda: {"pid": os.getpid(), "scenario": SCENARIO, "child": service.pid})
    for step in range(1000):
        fetch_batch(step)


if __name__ == "__main__":
    if SCENARIO not in SCENARIOS:
        sys.exit(f"usage: busy_helpers.py [{'|'.join(SCENARIOS)}]; not {SCENARIO!r}")
    scenarios = {"pool_imap": pool_imap, "prefetch_thread": prefetch_thread, "child_computes": child_computes}
    scenarios.update(child_writes=child_writes, join_blas=join_blas, polls_child=polls_child)
    scenarios.update(polls_service=polls_service, mp_child_computes=mp_child_computes, asyncio_child=asyncio_child)
    scenarios.update(socket_child=socket_child, lock_holder_computes=lock_holder_computes)
    scenarios.get(SCENARIO, pool_jobs)()
