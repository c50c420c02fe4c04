"""Healthy jobs that sleep most of the time; one scenario per argument (``paced.py <scenario>``).

Each makes steady progress, logs nothing, and is found asleep (or waiting for a sleeper) in nearly
every stack sample, one second apart. None is hung.

- ``throttled``: a torch training loop that keeps to a duty cycle: each step (an MLP's forward,
  backward and AdamW step on one thread, ~30-60 ms here) is followed by ``time.sleep(2.0)``.
- ``child_stream``: the trainer consumes ``for line in proc.stdout`` the JSON records of an extractor
  child (``python -c``) that computes a feature (numpy FFTs) and then sleeps 2.2 s before the next;
  the trainer takes one SGD step per record. The trainer waits in a pipe read, the child sleeps.
- ``slow_shard``: two gloo ranks (``torch.multiprocessing.spawn``); rank 1's ``Dataset.__getitem__``
  sleeps 0.5 s per item (slow storage; batch 4, ``num_workers=0``), rank 0's is instant, so rank 0
  waits in each gradient ``all_reduce`` for rank 1 most of the time. A step completes every ~2 s.

- ``queue_producer``: the trainer takes batches from a ``multiprocessing.Queue`` (no timeout) that a
  producer process (fork) fills, one every 2.5 s (it waits for an upstream service: a sleep).
- ``process_pool``: a ``ProcessPoolExecutor(2)`` fetches shards, each task sleeping 3 s (a slow object
  store) and then decoding; the main thread keeps two in flight, in ``wait(FIRST_COMPLETED)``.
- ``slow_worker``: a torch ``DataLoader`` over an ``IterableDataset`` whose one worker sleeps 0.4 s a
  record (slow storage); the trainer waits for each batch of 4 (with the DataLoader's own 5 s poll).
- ``upload_thread``: each step waits (``join``) for the previous step's checkpoint upload, a thread that
  sends 4 MB in 64 KiB chunks, throttled to about 0.65 MB/s, down a pipe to an uploader program
  (``cat`` to /dev/null): no file of the job grows.
- ``event_loop_feed``: an asyncio event loop in a thread fetches batches for the trainer, one every 2 s
  (``await asyncio.sleep(2.0)``: an API's pacing), into a ``queue.Queue``; the trainer waits in ``get()``
  (no timeout), the loop in ``epoll_wait`` with its next timer as the timeout.
- ``fifo_producer``: the trainer reads fixed-size shards from a named pipe that a decoder child
  (``python -c``) writes, one every 20 s (``while True``: decode, write, ``time.sleep(20)``): the trainer
  waits in the FIFO's read, the decoder sleeps with more than the watch's 6 s left.
- ``retry_backoff``: each step fetches its batch from a rate-limited service (a child running
  ``http.server``) through urllib3 with ``Retry(status_forcelist=[429], backoff_factor=1.0)``; the
  service refuses two tries of three with ``429`` and closes the connection, so the trainer sleeps in
  Retry's backoff (1 s, then 2 s) before each batch.
- ``drop_folder``: the trainer's own ``while True`` loop globs a drop folder for new shards, trains on
  each and logs it, and sleeps 2 s when none is new (an ingest service drops the next one later). One
  shard is there at the start; the next has not come yet: a sleeping loop that wakes, looks and
  sleeps again, its log written seconds ago.
- ``cooldown``: after each epoch the trainer logs "cooling down 600 s" and calls ``time.sleep(600)``
  (an API's rate limit for its evaluation): a `for` loop over epochs asleep for ten minutes, its log
  written seconds ago (the ninth hunt's s03_cooldown_sleep).

READY (``{"pid", "scenario", "child_pid"?, "rank0_pid"?, "rank1_pid"?}``): after three or four steps
(three records); ``pid`` is the process to diagnose (for ``slow_shard``, the parent of the ranks).
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time

import _common

EXTRACTOR = r"""
import json, sys, time
import numpy as np
rng = np.random.default_rng(0)
for i in range(10**6):
    x = rng.standard_normal(1 << 16)
    for _ in range(10):
        x = np.abs(np.fft.rfft(x, n=1 << 16))[: 1 << 15].repeat(2)
    sys.stdout.write(json.dumps({"id": i, "feat": (x[:64] / (x.max() + 1e-9)).tolist()}) + "\n")
    sys.stdout.flush()
    time.sleep(2.2)
"""


def throttled() -> None:
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(10**6):
        x = torch.randn(256, 512)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 3:
            _common.mark_ready(scenario="throttled")
        time.sleep(2.0)  # the duty cycle


def child_stream() -> None:
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    proc = subprocess.Popen([sys.executable, "-I", "-c", EXTRACTOR], stdout=subprocess.PIPE, text=True)
    for n, line in enumerate(proc.stdout, 1):
        x = torch.tensor(json.loads(line)["feat"]).unsqueeze(0)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if n == 3:
            _common.mark_ready(scenario="child_stream", child_pid=proc.pid)


class SlowShard:
    def __init__(self, rank: int):
        self.rank = rank

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, i: int):
        import torch

        if self.rank == 1:
            time.sleep(0.5)  # slow storage for this rank's shard
        g = torch.Generator().manual_seed(i)
        return torch.randn(128, generator=g), torch.randint(0, 10, (), generator=g)


def slow_shard_rank(rank: int, world: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(hours=1))
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    pids = [None] * world
    dist.all_gather_object(pids, os.getpid())
    for step, (x, y) in enumerate(DataLoader(SlowShard(rank), batch_size=4, num_workers=0)):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        if rank == 0 and step == 3:
            _common.mark_ready(scenario="slow_shard", rank0_pid=pids[0], rank1_pid=pids[1], pid=os.getppid())


def slow_shard() -> None:
    import torch.multiprocessing as mp

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(_common.free_port())
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    mp.spawn(slow_shard_rank, args=(2,), nprocs=2, join=True)


def _produce(queue) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    for i in range(10**6):
        time.sleep(2.5)  # the upstream service's next chunk
        queue.put((i, rng.integers(0, 1000, size=(16, 64))))


def queue_producer() -> None:
    import multiprocessing

    import torch

    torch.set_num_threads(1)
    queue = multiprocessing.get_context("fork").Queue(maxsize=2)
    producer = multiprocessing.get_context("fork").Process(target=_produce, args=(queue,), daemon=True)
    producer.start()
    model = torch.nn.EmbeddingBag(1000, 32)
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    for step in range(1, 10**6):
        _, ids = queue.get()
        loss = model(torch.from_numpy(ids)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 3:
            _common.mark_ready(scenario="queue_producer", child_pid=producer.pid)


def _fetch_shard(k: int):
    import numpy as np

    time.sleep(3.0)  # a slow object-store read
    x = np.random.default_rng(k).standard_normal((256, 32)).astype(np.float32)
    return x, (x.sum(1) > 0).astype(np.int64)


def process_pool() -> None:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(32, 2)
    opt = torch.optim.SGD(model.parameters(), 0.05)
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"))
    pending = {pool.submit(_fetch_shard, k) for k in range(2)}
    shards = 0
    while True:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            x, y = future.result()
            loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
            opt.zero_grad()
            loss.backward()
            opt.step()
            shards += 1
            pending.add(pool.submit(_fetch_shard, shards + 1))
            if shards == 3:
                _common.mark_ready(scenario="process_pool")


def _records():
    import torch

    for i in range(10**6):
        time.sleep(0.4)  # slow storage
        yield torch.full((16,), float(i))


def slow_worker() -> None:
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    class Records(IterableDataset):
        def __iter__(self):
            return _records()

    torch.set_num_threads(1)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), 1e-3)
    for step, batch in enumerate(DataLoader(Records(), batch_size=4, num_workers=1), 1):
        loss = model(batch).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 3:
            _common.mark_ready(scenario="slow_worker")


def _upload(sink, size: int) -> None:
    chunk = os.urandom(64 << 10)
    for _ in range(size // len(chunk)):
        sink.write(chunk)  # to the upload's connection (a pipe to the uploader program here)
        sink.flush()
        time.sleep(0.1)  # the uploader's bandwidth cap: about 0.65 MB/s


def upload_thread() -> None:
    import threading

    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), 1e-3)
    uploader = None
    sink = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    for step in range(1, 10**6):
        loss = model(torch.randn(8, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if uploader is not None:
            uploader.join()  # one upload at a time
        uploader = threading.Thread(target=_upload, args=(sink.stdin, 4 << 20), name="ckpt-upload")
        uploader.start()
        if step == 2:
            _common.mark_ready(scenario="upload_thread")


def event_loop_feed() -> None:
    import asyncio
    import queue
    import threading

    import torch

    torch.set_num_threads(1)
    batches: queue.Queue = queue.Queue(maxsize=2)

    async def fetch() -> None:
        for _ in range(10**6):
            await asyncio.sleep(2.0)  # the API's pacing: one request every 2 s
            batches.put(torch.randn(16, 32))

    threading.Thread(target=lambda: asyncio.run(fetch()), name="prefetch", daemon=True).start()
    model = torch.nn.Linear(32, 1)
    opt = torch.optim.SGD(model.parameters(), 1e-3)
    for step in range(1, 10**6):
        loss = model(batches.get()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 3:
            _common.mark_ready(scenario="event_loop_feed")


PACED_DECODER = r"""
import sys, time
import numpy as np
out = open(sys.argv[1], "wb")
rng = np.random.default_rng(0)
while True:
    shard = np.tanh(rng.standard_normal((64, 256), dtype=np.float32))  # decode the next shard
    out.write(shard.tobytes())
    out.flush()
    time.sleep(20.0)  # the source's pace: one shard every 20 s
"""


def fifo_producer() -> None:
    import numpy as np
    import torch

    fifo = _common.workdir() / "shards.fifo"
    os.mkfifo(fifo, 0o600)
    decoder = subprocess.Popen([sys.executable, "-I", "-c", PACED_DECODER, str(fifo)])
    torch.set_num_threads(1)
    model = torch.nn.Linear(256, 1)
    opt = torch.optim.SGD(model.parameters(), 1e-3)
    with open(fifo, "rb") as shards:
        for step in range(1, 10**6):
            data = shards.read(64 * 256 * 4)
            loss = model(torch.from_numpy(np.frombuffer(data, dtype=np.float32).reshape(64, 256).copy())).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step == 1:
                _common.mark_ready(scenario="fifo_producer", child_pid=decoder.pid)


RATE_LIMITED_SERVICE = r"""
import http.server, itertools
tries = itertools.count()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"" if next(tries) % 3 != 2 else b"x" * 4096  # two tries of three refused
        self.send_response(200 if body else 429)
        self.send_header("Content-Length", str(len(body)))
        if not body:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def retry_backoff() -> None:
    import torch
    import urllib3
    from urllib3.util.retry import Retry

    service, port = _common.start_server_child(RATE_LIMITED_SERVICE)
    http = urllib3.PoolManager(retries=Retry(total=20, status_forcelist=[429], backoff_factor=1.0))
    torch.set_num_threads(1)
    model = torch.nn.Linear(64, 1)
    opt = torch.optim.SGD(model.parameters(), 1e-3)
    for step in range(1, 10**6):
        data = http.request("GET", f"http://127.0.0.1:{port}/batch/{step}").data
        loss = model(torch.frombuffer(bytearray(data), dtype=torch.uint8).float().view(-1, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 2:
            _common.mark_ready(scenario="retry_backoff", child_pid=service.pid)


def drop_folder() -> None:
    import glob

    import torch

    torch.set_num_threads(1)
    shards = _common.workdir() / "shards"
    shards.mkdir(exist_ok=True)
    torch.save(torch.randn(64, 32), shards / "s0.pt")  # the ingest service's first drop
    model = torch.nn.Linear(32, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen, looks = set(), 0
    while True:
        new = sorted(set(glob.glob(str(shards / "*.pt"))) - seen)
        if not new:
            looks += 1
            if looks == 1:
                _common.mark_ready(scenario="drop_folder")
            time.sleep(2.0)  # poll the drop folder
            continue
        for name in new:
            x = torch.load(name)
            seen.add(name)
            for _ in range(20):
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            print(f"trained on {name}: loss {loss.item():.4f}", flush=True)


def cooldown() -> None:
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for _ in range(50):
            loss = model(torch.randn(16, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} done loss {loss.item():.4f}; cooling down 600 s", flush=True)
        _common.mark_ready(scenario="cooldown")
        time.sleep(600)  # a deliberate cooldown between epochs


SCENARIOS = {
    "cooldown": cooldown,
    "drop_folder": drop_folder,
    "throttled": throttled,
    "child_stream": child_stream,
    "slow_shard": slow_shard,
    "queue_producer": queue_producer,
    "process_pool": process_pool,
    "slow_worker": slow_worker,
    "upload_thread": upload_thread,
    "event_loop_feed": event_loop_feed,
    "retry_backoff": retry_backoff,
    "fifo_producer": fifo_producer,
}

if __name__ == "__main__":
    _common.run_scenario(SCENARIOS)
