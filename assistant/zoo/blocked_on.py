"""Hangs whose cause is at the end of a wait: the thread blocks on an object another party holds.

One program, one scenario per argument (``python blocked_on.py <scenario>``); the main thread blocks,
a helper thread (or the spawner, for what the GIL hides) checks the hang is real and writes READY.

- ``fifo_read``: ``open()`` of ``<workdir>/feed.fifo`` for reading; nothing ever opens it for writing.
- ``fifo_write``: ``open()`` of ``<workdir>/out.fifo`` for writing; nothing ever reads it.
- ``pipe_reader``: reads the stdout pipe of a child that writes one line a second; the test then
  SIGSTOPs the child (READY names it ``writer_pid``) and the read never returns.
- ``metrics_fifo``: the job streams weight histograms, a JSON line a step, into ``<workdir>/metrics.fifo``,
  read by a sidecar child (``python -c``) that reads one line and then polls, ``while not
  os.path.exists(cred)``, for a credentials file that never comes: the FIFO fills and the job's write
  to it (not to stdout) blocks.
- ``tee_child``: the job sends its own stdout through a child (``os.dup2`` of the child's stdin pipe
  onto fd 1, as scripts that tee their output to a log file do); the child never reads, so a
  ``print`` blocks in ``pipe_write`` once 64 KiB are buffered. The test may SIGSTOP the child.
- ``connect``: ``connect()`` to a listener (a child process) whose accept queue is full and which
  never accepts: the SYN is dropped, the socket stays in SYN_SENT.
- ``recv``: ``recv()`` on a connection a child accepted and never answers.
- ``recv_unaccepted``: ``recv()`` on a connection the listening child never even accepted.
- ``http``: ``urllib.request.urlopen`` without a timeout against a child that accepts and never
  answers (stack: ``http.client`` ``getresponse`` -> socket read).
- ``asyncio_reads``: three ``asyncio.open_connection`` streams to a child that accepts and never
  answers, each awaiting ``reader.read()`` under ``asyncio.gather``: the main thread is asyncio's event
  loop, idle in ``epoll_wait`` on the three connections.
- ``asyncio_two_services``: ``asyncio.gather`` of two stream requests, one to a child that sends a
  byte every half second, one to a child that accepts and never answers.
- ``pool_downloads``: a ``ThreadPoolExecutor`` of 4 fetches four shards, the main thread in
  ``as_completed``; three return, the first ``urlopen``s a child that accepts and never answers.
- ``pool_polls``: ``multiprocessing.Pool(2).map`` whose task polls (``time.sleep`` in a loop) for a
  marker file that never appears for one shard.
- ``hub``: ``huggingface_hub.hf_hub_download`` against an endpoint (``HF_ENDPOINT``) that accepts and
  never answers, with the Hub's own timeouts raised to a day (stack: huggingface_hub -> its HTTP
  client -> socket read).
- ``flock``: ``fcntl.flock(LOCK_EX)`` on ``<workdir>/train.lock``, held by a child for ever.
- ``task_done_missing``: two decoder threads take shards from a ``queue.Queue``; one shard is filtered
  out with ``continue`` before ``task_done()``, so the main thread's ``Queue.join()`` waits for ever
  while both threads idle in ``get()``.
- ``semaphore_leak``: four shard-loader threads bound their reads with a ``threading.Semaphore(2)``; a
  corrupt shard's ``except`` path returns without ``release()``, so both permits leak and every loader
  waits in ``acquire()`` while the main thread joins them.
- ``lock_behind_prompt``: a cache-building child takes ``<workdir>/cache.lock`` (``flock``) and then asks
  a y/N question with ``input()`` on its stdin, the pipe its parent holds and never writes; the parent
  waits for the same lock. A prompt the lock waits behind, not a lock-order deadlock.
- ``child_stdin``: ``subprocess.Popen(stdin=PIPE).wait()`` on a child that reads its stdin: the
  parent holds the pipe's write end and waits, the child waits for input that never comes.
- ``stdin_not_closed``: rows streamed into ``gzip``'s stdin (``Popen(stdin=PIPE, stdout=file)``), then
  ``wait()`` without closing the pipe: gzip waits for the end of its input, the parent for gzip.
- ``breakpoint_left``: a ``breakpoint()`` left in the loop, with stdin a pipe that a child holds
  open and never writes: pdb waits for a command on it.
- ``stale_lock``: ``filelock.SoftFileLock(<workdir>/model.lock).acquire()`` on an empty lock file that
  a killed earlier run left behind (an empty marker: filelock never breaks it, as torch's FileBaton
  never does): the thread polls for ever, in time.sleep between tries, and no process has the file open.
- ``own_lock_poll``: the job's own ``wait_for_gpu(lock_path)`` polls ``while os.path.exists(lock_path):
  time.sleep(0.5)`` for a lock file that names the pid of a run that has exited (a stale lock).
- ``event_loop_idle``: the trainer waits in ``queue.Queue.get()`` for batches that an asyncio event loop
  in a thread should fetch once ``<workdir>/upstream/manifest.json`` exists; the loop looks every second
  (``await asyncio.sleep(1.0)``) and the file never appears.
- ``fifo_producer_polls``: the trainer reads a named pipe whose writer, a child (``python -c``), polls
  ``while not os.path.exists(manifest): time.sleep(20)`` for an upstream manifest that never appears,
  before it would write its first shard.
- ``results_poll``: the job's own ``wait_for_scores(results)`` polls ``while not os.path.exists(results):
  time.sleep(0.5)`` for an evaluator's results file that nothing writes (no evaluator runs).
- ``sqlite_held``: the launcher opens its run database, ``BEGIN EXCLUSIVE`` to register the run, then
  starts the trainer (a ``multiprocessing.Process``) and joins it before committing; the trainer logs
  a metric into the same database with ``sqlite3.connect(db, timeout=3600)``: SQLite's busy handler
  sleeps and retries on the launcher's lock, the launcher waits for the trainer to exit.
- ``lost_wakeup``: a prefetch thread fills a buffer, ``notify_all()``s a ``threading.Condition`` and
  ends; the main thread, done with its setup a moment later, calls ``cond.wait()`` with no predicate
  and no timeout: the notify came before the wait.
- ``queue_join``: a child (multiprocessing, fork) puts 1 MiB into a ``multiprocessing.Queue`` and
  returns; the parent ``join()``s it before reading the queue. The child cannot exit until its
  feeder thread has written the item into the pipe, which only the parent's read would drain
  (the "joining processes that use queues" pitfall of the multiprocessing docs).
- ``queue_producer``: a ``multiprocessing.Process`` (spawn) produces into a ``multiprocessing.Queue``
  from a FIFO nobody writes; the main process waits in ``queue.get()``. No DataLoader anywhere.
- ``barrier_party_died``: three threads meet at a ``threading.Barrier(3)``; one raises first, the two
  others wait at the barrier, the main thread joins them.
- ``spawn_barrier``: ``torch.multiprocessing.spawn`` starts 2 processes (spawn context) that meet at
  a ``multiprocessing.Barrier`` set for 3 parties; the parent waits in ``ProcessContext.join`` (a
  poll on the children's sentinels, not wait4). multiprocessing's resource tracker runs beside
  them, idle in a pipe read as it always is.
- ``process_barrier``: a preprocessing step starts one ``multiprocessing.Process`` (fork) per shard, 2
  shards, and has them meet at a ``multiprocessing.Barrier`` sized from its config's ``num_workers``
  (3) after each pass; the parent ``join()``s them. No torch.
- ``stdin_feed``: standard input is a pipe fed by a producer child (as ``zcat data | python prep.py``
  makes it) that stalls without writing; the main thread reads fd 0. A data feed, not a prompt.
- ``prompt``: stdin is a terminal (a pseudo-terminal whose other side nobody types into, as in a
  tmux session left alone) and the job asks "wandb: Enter your choice:" with ``input()``.
- ``child_prompt``: the job runs a program that is not Python (``sh``, standing in for git asking
  "Username for 'https://...':" on a terminal) with ``subprocess.run``, its stdin a terminal nobody
  types into; the program waits in its read, the job in ``wait``.

READY: ``{"pid", "scenario", "path"?, "peer_pid"?, "port"?}``, written once the main thread sleeps
in the expected system call (its ``/proc/.../syscall`` or wait channel).
"""

from __future__ import annotations

import fcntl
import os
import platform
import socket
import subprocess
import sys
import threading
import time

import _common

PEER = r"""
import fcntl, os, socket, sys, time
what = sys.argv[1]
if what == "writer":
    while True:
        print("line", flush=True)
        time.sleep(1.0)
if what == "reader":
    sys.stdin.readline()
    sys.exit(0)
if what == "sink":  # holds its stdin and never reads it (a tee stuck on its own output)
    while True:
        time.sleep(3600)
if what == "locker":
    f = open(sys.argv[2], "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    print("LOCKED", flush=True)
    while True:
        time.sleep(3600)
if what == "asker":  # takes the lock, then asks on its stdin: the parent's pipe, never written
    f = open(sys.argv[2], "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    print("LOCKED", flush=True)
    input("The repository contains custom code which must be executed. Do you wish to run it? [y/N] ")
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(0)
print(s.getsockname()[1], flush=True)
if what == "silent":  # accepts, never answers
    conns = []
    while True:
        conns.append(s.accept()[0])
if what == "trickle":  # accepts one connection and sends it a byte every half second, for ever
    conn = s.accept()[0]
    while True:
        conn.sendall(b".")
        time.sleep(0.5)
while True:  # "deaf": never accepts
    time.sleep(3600)
"""

# Linux syscall numbers (x86_64, aarch64) of the calls the scenarios block in.
SYSCALLS = {
    "x86_64": {
        "open": (2, 257),
        "connect": (42,),
        "recv": (0, 45, 47),
        "poll": (7, 23, 270, 271),  # poll, select, pselect6, ppoll: a read with a timeout waits here
        "flock": (73,),
        "wait4": (61, 247),
        "sleep": (35, 230),
        "write": (1, 20),
        "epoll": (232, 281),
    },
    "aarch64": {
        "open": (56,),
        "connect": (203,),
        "recv": (63, 207, 212),
        "poll": (72, 73),
        "flock": (32,),
        "wait4": (260, 95),
        "sleep": (101, 115),
        "write": (64, 66),
        "epoll": (22,),
    },
}
WCHANS = {
    "open": ("wait_for_partner", "fifo_open"),
    "recv": (
        "pipe_read",
        "anon_pipe_read",
        "pipe_wait_readable",
        "sk_wait_data",
        "wait_woken",
        "tcp_recvmsg_locked",
        "n_tty_read",
    ),
    "connect": ("inet_wait_for_connect", "wait_woken"),
    "poll": ("do_sys_poll", "poll_schedule_timeout", "do_select", "core_sys_select"),
    "flock": ("locks_lock_inode_wait", "flock_lock_inode_wait", "locks_wait"),
    "wait4": ("do_wait", "kernel_wait4"),
    "sleep": ("hrtimer_nanosleep", "do_nanosleep", "clock_nanosleep"),
    "write": ("pipe_write", "anon_pipe_write"),
    "epoll": ("do_epoll_wait", "ep_poll"),
}


def _peer(what: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-I", "-c", PEER, what, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _in_syscall(tid: int, call: str) -> bool:
    if "|" in call:  # any of them: "recv|poll" for a read that may or may not carry a timeout
        return any(_in_syscall(tid, one) for one in call.split("|"))
    pid = os.getpid()
    if _common.task_state(pid, tid) not in ("S", "D"):
        return False
    where = _common.wchan(pid, tid)
    if where and where != "0" and where in WCHANS[call]:
        return True
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall") as f:
            number = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    return number in SYSCALLS.get(platform.machine(), {}).get(call, ())


def ready_in(call: str, **info) -> None:
    """READY once the main thread has sat in `call` for a few consecutive samples."""
    tid = threading.get_native_id()

    def blocked() -> bool:
        for _ in range(5):
            if not _in_syscall(tid, call):
                return False
            time.sleep(0.05)
        return True

    _common.ready_when(blocked, lambda: dict(info, scenario=sys.argv[1]))


def fifo_read() -> None:
    path = _common.workdir() / "feed.fifo"
    os.mkfifo(path)
    ready_in("open", path=str(path))
    with open(path, "rb") as feed:
        feed.read()


def fifo_write() -> None:
    path = _common.workdir() / "out.fifo"
    os.mkfifo(path)
    ready_in("open", path=str(path))
    with open(path, "wb") as out:
        out.write(b"never")


def pipe_reader() -> None:
    child = _peer("writer")
    child.stdout.readline()  # it is alive and writing
    ready_in("recv", peer_pid=child.pid)
    while True:
        child.stdout.readline()


def tee_child() -> None:
    tee = _peer("sink")
    os.dup2(tee.stdin.fileno(), 1)  # as a script that tees its own output through a child
    ready_in("write", peer_pid=tee.pid)
    step = 0
    while True:
        step += 1
        print(f"step {step} loss 0.5 " + "." * 200, flush=True)


METRICS_SIDECAR = r"""
import os, sys, time
metrics = open(sys.argv[1], "rb")
metrics.readline()  # the header; the upload starts once the credentials are there
while not os.path.exists(sys.argv[2]):
    time.sleep(1.0)
"""


def metrics_fifo() -> None:
    fifo = _common.workdir() / "metrics.fifo"
    os.mkfifo(fifo, 0o600)
    cred = str(_common.workdir() / "upload" / "credentials.json")
    sidecar = subprocess.Popen([sys.executable, "-I", "-c", METRICS_SIDECAR, str(fifo), cred])
    metrics = open(fifo, "w")
    ready_in("write", peer_pid=sidecar.pid, fd=metrics.fileno())
    for step in range(10**6):
        metrics.write(f'{{"step": {step}, "hist": [{", ".join(["0.125"] * 400)}]}}\n')
        metrics.flush()


def _listener(kind: str) -> tuple[subprocess.Popen, int]:
    child = _peer(kind)
    return child, int(child.stdout.readline())


def connect() -> None:
    child, port = _listener("deaf")
    # Fill the accept queue (backlog 0 holds one connection), then a blocking connect: the kernel
    # drops its SYN, the socket stays in SYN_SENT and connect() sleeps.
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    time.sleep(0.2)
    ready_in("connect", peer_pid=child.pid, port=port)
    while True:
        s = socket.create_connection(("127.0.0.1", port))  # no timeout: the bug
        fillers.append(s)  # the kernel accepted a retry: connect again, the queue is fuller now


def recv(accepting: bool = True) -> None:
    child, port = _listener("silent" if accepting else "deaf")
    s = socket.create_connection(("127.0.0.1", port))
    ready_in("recv", peer_pid=child.pid, port=port)
    s.recv(1)
    _common.sleep_forever()


def http() -> None:
    import urllib.request

    child, port = _listener("silent")
    ready_in("recv", peer_pid=child.pid, port=port)
    urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/embeddings")  # no timeout: the bug
    _common.sleep_forever()


def asyncio_reads() -> None:
    """Three shard requests in flight on asyncio streams to a server that accepts and never answers:
    the event loop idles in epoll_wait on their connections (no recv of its own on any stack)."""
    import asyncio

    child, port = _listener("silent")

    async def fetch(shard: int) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET /shard-{shard} HTTP/1.0\r\n\r\n".encode())
        await writer.drain()
        return await reader.read(65536)  # no timeout: the bug

    async def main() -> None:
        await asyncio.gather(*(fetch(shard) for shard in range(3)))

    ready_in("epoll", peer_pid=child.pid, port=port)
    asyncio.run(main())
    _common.sleep_forever()


def asyncio_two_services() -> None:
    """Two requests in flight under asyncio.gather: one service streams its answer slowly (a byte
    every half second), the other accepts and never answers. The event loop wakes for the stream and
    goes back to epoll_wait; gather waits for the silent one for ever."""
    import asyncio

    silent, silent_port = _listener("silent")
    stream, stream_port = _listener("trickle")

    async def fetch(port: int, size: int) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /shard HTTP/1.0\r\n\r\n")
        await writer.drain()
        return await reader.readexactly(size)  # no timeout: the bug

    async def main() -> None:
        await asyncio.gather(fetch(stream_port, 1 << 30), fetch(silent_port, 64))

    started = time.monotonic()
    tid = threading.get_native_id()

    def silent_long_enough() -> bool:  # the silent connection has been quiet past the chain's threshold
        return time.monotonic() - started > 4.0 and _in_syscall(tid, "epoll")

    _common.ready_when(
        silent_long_enough,
        lambda: {"scenario": sys.argv[1], "peer_pid": silent.pid, "port": silent_port, "stream_port": stream_port},
    )
    asyncio.run(main())
    _common.sleep_forever()


def pool_downloads() -> None:
    """Four shards fetched by a ThreadPoolExecutor, the main thread in as_completed: shards 1-3 come
    back (their threads, started after the first, then idle in the executor's loop), shard 0's
    server accepts and never answers (urlopen with no timeout)."""
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor, as_completed

    child, port = _listener("silent")

    def fetch(shard: int) -> bytes:
        if shard > 0:
            time.sleep(0.2)  # long enough for the pool to start a thread per shard
            return b"x" * 100
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/shard-{shard}") as response:  # no timeout
            return response.read()

    def waiting() -> bool:  # the main thread in as_completed, one fetch in its recv, the others idle
        fetchers = [t for t in threading.enumerate() if t.name.startswith("fetch")]
        stacks = {t.native_id: _common.stack_functions(t.ident) for t in fetchers}
        blocked = [tid for tid, names in stacks.items() if "urlopen" in names and _in_syscall(tid, "recv")]
        idle = [tid for tid, names in stacks.items() if names[:1] == ["_worker"]]
        main = _common.stack_functions(threading.main_thread().ident)
        return "as_completed" in main and len(blocked) == 1 and len(idle) == 3

    _common.ready_when(waiting, lambda: {"scenario": sys.argv[1], "peer_pid": child.pid, "port": port})
    with ThreadPoolExecutor(4, thread_name_prefix="fetch") as pool:
        for done in as_completed([pool.submit(fetch, shard) for shard in range(4)]):
            print(f"shard of {len(done.result())} bytes", flush=True)
    _common.sleep_forever()


def _wait_for_marker(shard: int) -> int:
    marker = _common.workdir() / f"shard-{shard}.done"
    while not marker.exists():  # the job that writes it died: it never appears
        time.sleep(0.2)
    return shard


def pool_polls() -> None:
    """multiprocessing.Pool(2).map over four shards; each task polls for its shard's marker file,
    and shard 2's never appears: its worker sleeps in the task's own loop, the parent in map."""
    import multiprocessing

    for shard in (0, 1, 3):
        (_common.workdir() / f"shard-{shard}.done").touch()
    main = threading.main_thread()

    def waiting() -> bool:
        import psutil

        looping = [c for c in psutil.Process().children() if _in_syscall_of(c.pid, "sleep")]
        return len(looping) == 1 and "map" in _common.stack_functions(main.ident)

    _common.ready_when(waiting, lambda: {"scenario": sys.argv[1]})
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(_wait_for_marker, range(4)), flush=True)


def _in_syscall_of(pid: int, call: str) -> bool:
    where = _common.wchan(pid)
    return bool(where) and where in WCHANS[call] and _common.sleeping_steadily(pid, samples=3)


def hub() -> None:
    """A model download from the Hugging Face Hub whose endpoint accepts and never answers; the job
    raised the Hub's own timeouts (10 s each by default), so the download waits for ever."""
    child, port = _listener("silent")
    os.environ["HF_ENDPOINT"] = f"http://127.0.0.1:{port}"
    os.environ["HF_HUB_ETAG_TIMEOUT"] = os.environ["HF_HUB_DOWNLOAD_TIMEOUT"] = "86400"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    from huggingface_hub import hf_hub_download  # after the settings: the library reads them at import

    # its HTTP client sets the (raised) timeout on the socket, so the read waits in poll(); an older
    # client with no timeout waits in recv()
    ready_in("recv|poll", peer_pid=child.pid, port=port)
    hf_hub_download("example-org/tiny-model", "config.json", cache_dir=str(_common.workdir() / "hub-cache"))
    _common.sleep_forever()


def flock(peer: str = "locker", name: str = "train.lock") -> None:
    """Wait for an flock a child holds: for ever ("locker"), or while it asks on its stdin ("asker")."""
    path = _common.workdir() / name
    child = _peer(peer, str(path))
    child.stdout.readline()  # LOCKED
    ready_in("flock", path=str(path), peer_pid=child.pid)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
    _common.sleep_forever()


def task_done_missing() -> None:
    import queue

    shards: queue.Queue = queue.Queue()

    def decode() -> None:
        while True:
            shard = shards.get()
            if shard % 7 == 3:  # a quality filter drops it
                continue  # the bug: no task_done() for it
            shards.task_done()

    for _ in range(2):
        threading.Thread(target=decode, name="shard-decoder", daemon=True).start()
    for shard in range(10):
        shards.put(shard)
    _common.ready_when(_common._main_sleeps_in("join"), lambda: dict(scenario=sys.argv[1]))
    shards.join()
    _common.sleep_forever()


def semaphore_leak() -> None:
    reads = threading.Semaphore(2)  # at most two shards in memory at once

    def load_shard(index: int):
        reads.acquire()
        try:
            if index in (1, 2):
                raise ValueError(f"shard {index}: truncated")
        except ValueError:
            return None  # the bug: the permit is never released on this path
        reads.release()
        return index

    def loader(first: int) -> None:
        for index in range(first, 16, 4):
            load_shard(index)

    loaders = [threading.Thread(target=loader, args=(k,), name=f"shard-loader-{k}") for k in range(4)]
    for thread in loaders:
        thread.start()
    _common.ready_when(_common._main_sleeps_in("join"), lambda: dict(scenario=sys.argv[1]))
    for thread in loaders:
        thread.join()
    _common.sleep_forever()


def lock_behind_prompt() -> None:
    flock("asker", "cache.lock")


def child_stdin() -> None:
    child = _peer("reader")
    ready_in("wait4", peer_pid=child.pid)
    child.wait()  # the parent holds the write end of the child's stdin and never writes
    _common.sleep_forever()


def stdin_not_closed() -> None:
    with open(_common.workdir() / "rows.tsv.gz", "wb") as dst:
        proc = subprocess.Popen(["gzip", "-6"], stdin=subprocess.PIPE, stdout=dst)
        for row in range(2000):
            proc.stdin.write(f"{row}\t{row * 0.5:.5f}\n".encode())
        ready_in("wait4", peer_pid=proc.pid)
        proc.wait()  # the write end stays open: gzip never sees the end of its input
    _common.sleep_forever()


def _fill_queue(queue) -> None:
    queue.put(b"x" * (1 << 20))  # far more than a pipe buffer holds


def _produce_from_feed(queue, path: str) -> None:
    queue.put("header")
    with open(path) as feed:  # the upstream feed never opens its end
        for line in feed:
            queue.put(line)


def queue_producer() -> None:
    import multiprocessing

    path = _common.workdir() / "feed.fifo"
    os.mkfifo(path)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_produce_from_feed, args=(queue, str(path)), name="feeder")
    child.start()
    queue.get()  # the header: the producer runs
    _common.ready_when(
        lambda: _common.child_blocked_in_open() == child.pid,
        lambda: dict(scenario=sys.argv[1], peer_pid=child.pid, path=str(path)),
    )
    queue.get()  # the next item never comes
    _common.sleep_forever()


def queue_join() -> None:
    import multiprocessing

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_fill_queue, args=(queue,), name="preprocess")
    child.start()
    main_tid = threading.get_native_id()

    def feeder_stuck() -> bool:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        except OSError:
            return False
        return len(tids) >= 2 and all(_common.sleeping_steadily(child.pid, tid) for tid in tids)

    _common.ready_when(
        lambda: _in_syscall(main_tid, "wait4") and feeder_stuck(),
        lambda: dict(scenario=sys.argv[1], peer_pid=child.pid),
    )
    child.join()  # before queue.get(): the child waits for its feeder, the feeder for this reader
    _common.sleep_forever()


def _barrier_party(index: int, barrier) -> None:
    barrier.wait()  # a third party never comes


def spawn_barrier() -> None:
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    barrier = context.Barrier(3)
    started = mp.start_processes(_barrier_party, args=(barrier,), nprocs=2, join=False, start_method="spawn")
    pids = started.pids()

    def parties_waiting() -> bool:
        return all(_common.sleeping_steadily(pid) for pid in pids)

    _common.ready_when(parties_waiting, lambda: dict(scenario=sys.argv[1], party_pids=pids))
    while not started.join():
        pass
    _common.sleep_forever()


def _shard_pass(index: int, barrier) -> None:
    for _ in range(3):
        sum(i * i for i in range(10_000 * (index + 1)))  # one pass over the shard
        barrier.wait()  # parties=3: only 2 processes were started


def process_barrier() -> None:
    import multiprocessing

    config = {"num_workers": 3}
    shards = ["train-000", "train-001"]
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(config["num_workers"])
    procs = [context.Process(target=_shard_pass, args=(i, barrier), name=f"prep-{i}") for i in range(len(shards))]
    for proc in procs:
        proc.start()
    pids = [proc.pid for proc in procs]
    _common.ready_when(
        lambda: all(_common.sleeping_steadily(pid) for pid in pids),
        lambda: dict(scenario=sys.argv[1], party_pids=pids),
    )
    for proc in procs:
        proc.join()
    _common.sleep_forever()


def _stdin_from_a_silent_child() -> subprocess.Popen:
    """Make this process's stdin a pipe whose write end only a child holds, and never writes."""
    read_end, write_end = os.pipe()
    holder = subprocess.Popen(
        [sys.executable, "-I", "-c", "import time\nwhile True: time.sleep(3600)"],
        stdout=write_end,
        stdin=subprocess.DEVNULL,
    )
    os.close(write_end)
    os.dup2(read_end, 0)
    os.close(read_end)
    return holder


def stdin_feed() -> None:
    producer = _stdin_from_a_silent_child()
    ready_in("recv", peer_pid=producer.pid)
    sys.stdin.buffer.read(1 << 16)  # the next chunk of data never comes
    _common.sleep_forever()


def breakpoint_left() -> None:
    """A breakpoint() left in the training loop; stdin is a pipe from a producer that holds it open
    and never writes (a shell's `sleep infinity | python train.py`, a wrapper): pdb waits there."""
    holder = _stdin_from_a_silent_child()
    ready_in("recv", peer_pid=holder.pid)
    for step in range(10):
        print(f"step {step} loss 0.5", flush=True)
        if step == 2:
            breakpoint()  # left in while chasing a NaN
    _common.sleep_forever()


def lost_wakeup() -> None:
    cond = threading.Condition()
    batches: list = []

    def prefetch() -> None:
        with cond:
            batches.append(list(range(1000)))
            cond.notify_all()  # nobody waits yet: the wakeup is lost

    thread = threading.Thread(target=prefetch, name="prefetch")
    thread.start()
    thread.join()  # the model's setup takes longer than the first batch
    _common.ready_when(_common._main_sleeps_in("wait"), lambda: dict(scenario=sys.argv[1]))
    with cond:
        cond.wait()
    _common.sleep_forever()


def barrier_party_died() -> None:
    """Three shard threads meet at a threading.Barrier(3); one raises before it gets there. The
    other two wait at the barrier for ever, and the main thread joins them."""
    barrier = threading.Barrier(3)

    def shard(index: int) -> None:
        if index == 2:
            raise OSError("shard 2: checksum mismatch")  # this party never arrives
        barrier.wait()

    threads = [threading.Thread(target=shard, args=(i,), name=f"shard-{i}") for i in range(3)]

    def waiting() -> bool:
        at_barrier = [t for t in threads[:2] if "wait" in _common.stack_functions(t.ident)]
        return len(at_barrier) == 2 and not threads[2].is_alive()

    _common.ready_when(waiting, lambda: dict(scenario=sys.argv[1]))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _common.sleep_forever()


def stale_lock() -> None:
    import filelock  # torch's own dependency

    path = _common.workdir() / "model.lock"
    path.write_text("")  # what an earlier run, killed while it held the lock, left behind
    ready_in("sleep", path=str(path))
    filelock.SoftFileLock(str(path)).acquire(poll_interval=0.5)  # no timeout: waits for ever
    _common.sleep_forever()


def own_lock_poll() -> None:
    script = "import os; print(os.getpid())"
    earlier = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True)
    lock_path = str(_common.workdir() / "gpu0.lock")
    with open(lock_path, "w") as f:
        f.write(earlier.stdout)  # the pid of a run that has exited since

    def wait_for_gpu(lock_path: str) -> None:
        while os.path.exists(lock_path):
            time.sleep(0.5)

    ready_in("sleep", path=lock_path, dead_pid=int(earlier.stdout))
    wait_for_gpu(lock_path)
    _common.sleep_forever()


def event_loop_idle() -> None:
    import asyncio
    import queue

    manifest = _common.workdir() / "upstream" / "manifest.json"
    batches: queue.Queue = queue.Queue(maxsize=2)

    async def fetch() -> None:
        while not manifest.exists():  # the upstream export that never lands
            await asyncio.sleep(1.0)
        batches.put(manifest.read_bytes())

    threading.Thread(target=lambda: asyncio.run(fetch()), name="prefetch", daemon=True).start()
    _common.ready_when(_common._main_sleeps_in("main_loop"), lambda: dict(scenario=sys.argv[1]))

    def main_loop() -> None:
        while True:
            batches.get()

    main_loop()


POLLING_DECODER = r"""
import os, sys, time
out = open(sys.argv[1], "wb")
while not os.path.exists(sys.argv[2]):  # the upstream export that never lands
    time.sleep(20.0)
out.write(open(sys.argv[2], "rb").read())
"""


def fifo_producer_polls() -> None:
    fifo = _common.workdir() / "shards.fifo"
    os.mkfifo(fifo, 0o600)
    manifest = str(_common.workdir() / "upstream" / "manifest.json")
    decoder = subprocess.Popen([sys.executable, "-I", "-c", POLLING_DECODER, str(fifo), manifest])
    with open(fifo, "rb") as shards:
        ready_in("recv", child_pid=decoder.pid)
        shards.read(4096)
    _common.sleep_forever()


def results_poll() -> None:
    results = str(_common.workdir() / "eval" / "scores.json")

    def wait_for_scores(results: str) -> None:
        while not os.path.exists(results):
            time.sleep(0.5)

    ready_in("sleep", path=results)
    wait_for_scores(results)
    _common.sleep_forever()


def _log_metric(db: str) -> None:
    import sqlite3

    con = sqlite3.connect(db, timeout=3600)
    con.execute("INSERT INTO metrics VALUES (?, ?)", (0, 0.5))
    con.commit()


def sqlite_held() -> None:
    import multiprocessing
    import sqlite3

    db = str(_common.workdir() / "runs.db")
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("CREATE TABLE runs (id INTEGER, name TEXT)")
    con.execute("CREATE TABLE metrics (step INTEGER, loss REAL)")
    con.execute("BEGIN EXCLUSIVE")
    con.execute("INSERT INTO runs VALUES (1, 'exp')")
    trainer = multiprocessing.get_context("fork").Process(target=_log_metric, args=(db,), name="trainer")
    trainer.start()
    _common.ready_when(
        lambda: _common.sleeping_steadily(trainer.pid, samples=10),
        lambda: {"scenario": sys.argv[1], "path": db, "child_pid": trainer.pid},
    )
    trainer.join()
    con.execute("COMMIT")


def prompt() -> None:
    master, slave = os.openpty()  # the master stays open: a terminal nobody types into
    os.dup2(slave, 0)
    ready_in("recv", tty=os.ttyname(0), master_fd=master)
    print("wandb: (1) Create a W&B account\nwandb: (2) Use an existing W&B account", flush=True)
    print("wandb: (3) Don't visualize my results", flush=True)
    input("wandb: Enter your choice: ")
    _common.sleep_forever()


def child_prompt() -> None:
    master, slave = os.openpty()  # the master stays open: a terminal nobody types into
    print("step 100 loss 0.300 (saving the run's git revision)", flush=True)
    asks = "printf \"Username for 'https://github.com': \" >&2; read user"
    child = subprocess.Popen(["sh", "-c", asks], stdin=slave)

    def waiting() -> bool:
        return _common.blocked_in(child.pid, None, ("n_tty_read", "wait_woken"), ("read",)) and (
            _common.sleeping_steadily(child.pid)
        )

    _common.ready_when(waiting, lambda: {"scenario": sys.argv[1], "peer_pid": child.pid, "tty": os.ttyname(slave)})
    child.wait()
    _common.sleep_forever()


SCENARIOS = {
    "fifo_read": fifo_read,
    "fifo_write": fifo_write,
    "pipe_reader": pipe_reader,
    "tee_child": tee_child,
    "connect": connect,
    "recv": recv,
    "recv_unaccepted": lambda: recv(accepting=False),
    "http": http,
    "hub": hub,
    "asyncio_reads": asyncio_reads,
    "pool_polls": pool_polls,
    "pool_downloads": pool_downloads,
    "asyncio_two_services": asyncio_two_services,
    "flock": flock,
    "child_stdin": child_stdin,
    "stdin_not_closed": stdin_not_closed,
    "queue_join": queue_join,
    "queue_producer": queue_producer,
    "barrier_party_died": barrier_party_died,
    "spawn_barrier": spawn_barrier,
    "process_barrier": process_barrier,
    "stdin_feed": stdin_feed,
    "breakpoint_left": breakpoint_left,
    "child_prompt": child_prompt,
    "stale_lock": stale_lock,
    "own_lock_poll": own_lock_poll,
    "event_loop_idle": event_loop_idle,
    "metrics_fifo": metrics_fifo,
    "fifo_producer_polls": fifo_producer_polls,
    "results_poll": results_poll,
    "lock_behind_prompt": lock_behind_prompt,
    "task_done_missing": task_done_missing,
    "semaphore_leak": semaphore_leak,
    "sqlite_held": sqlite_held,
    "lost_wakeup": lost_wakeup,
    "prompt": prompt,
}

if __name__ == "__main__":
    _common.run_scenario(SCENARIOS)
