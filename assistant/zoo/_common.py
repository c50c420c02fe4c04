"""Helpers shared by the zoo programs (they run as scripts, so this is imported as a sibling module).

Protocol with the spawner (``spawn.py``):

- ``ZOO_WORKDIR`` names a private directory for FIFOs, logs and checkpoints. When a program is run by
  hand without it, a temporary directory is made and printed on stderr.
- When the program has reached its hang (or, for the healthy job, after a few steps) it writes
  ``<workdir>/READY`` atomically: a JSON object with at least ``pid`` and whatever the scenario adds
  (the stuck worker's pid, the FIFO path...). The spawner waits for that file.

Readiness is checked from *inside* the job whenever it can be: a short-lived helper thread watches
the kernel (``/proc/<pid>/task/<tid>/wchan``) or the Python stacks (``sys._current_frames``) and
writes READY only once the hang is real, then exits.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

# syscall numbers, for kernels that hide wchan (it then reads "0")
_SYSCALLS = {
    "x86_64": {"openat": 257, "open": 2, "write": 1, "read": 0, "recvfrom": 45},
    "aarch64": {"openat": 56, "write": 64, "read": 63, "recvfrom": 207},
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def workdir() -> Path:
    wd = os.environ.get("ZOO_WORKDIR")
    if not wd:
        wd = tempfile.mkdtemp(prefix="zoo-")
        os.environ["ZOO_WORKDIR"] = wd  # children (DataLoader workers, ranks) use the same one
        print(f"zoo workdir: {wd}", file=sys.stderr, flush=True)
    path = Path(wd)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_marker(name: str, **info) -> Path:
    """Atomically write ``<workdir>/<name>`` as JSON (pid and time added)."""
    info.setdefault("pid", os.getpid())
    info.setdefault("time", time.time())
    target = workdir() / name
    tmp = target.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, target)
    return target


def read_marker(name: str) -> dict | None:
    try:
        return json.loads((workdir() / name).read_text())
    except (OSError, ValueError):
        return None


def mark_ready(**info) -> None:
    write_marker("READY", **info)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def wait_until(predicate: Callable[[], bool], timeout: float | None = None, interval: float = 0.02) -> bool:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return True
        except Exception:  # a process or file that is not there yet
            pass
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(interval)


def _task_file(pid: int, tid: int | None, name: str) -> str:
    return f"/proc/{pid}/task/{tid or pid}/{name}"


def wchan(pid: int, tid: int | None = None) -> str:
    try:
        with open(_task_file(pid, tid, "wchan")) as f:
            return f.read().strip()
    except OSError:
        return ""


def task_state(pid: int, tid: int | None = None) -> str:
    """One-letter state (R, S, D, T, Z...) of a thread, "" when gone."""
    try:
        with open(_task_file(pid, tid, "stat")) as f:
            stat = f.read()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2 :].split()[0]


def _syscall(pid: int, tid: int | None = None) -> int | None:
    try:
        with open(_task_file(pid, tid, "syscall")) as f:
            first = f.read().split()[0]
        return int(first)
    except (OSError, ValueError, IndexError):
        return None


def blocked_in(pid: int, tid: int | None, wchans: tuple[str, ...], syscalls: tuple[str, ...] = ()) -> bool:
    """True when the thread sleeps in one of the kernel functions ``wchans``.

    Where the kernel hides wchan ("0" or unreadable), falls back to: state S and the current syscall
    is one of ``syscalls``.
    """
    where = wchan(pid, tid)
    if where and where != "0":
        return where in wchans
    if task_state(pid, tid) not in ("S", "D"):
        return False
    numbers = _SYSCALLS.get(platform.machine(), {})
    current = _syscall(pid, tid)
    return current is not None and current in {numbers[s] for s in syscalls if s in numbers}


def sleeping_steadily(pid: int, tid: int | None = None, samples: int = 5, interval: float = 0.05) -> bool:
    """True when the thread is in state S (or D) in ``samples`` consecutive samples."""
    for i in range(samples):
        if task_state(pid, tid) not in ("S", "D"):
            return False
        if i + 1 < samples:
            time.sleep(interval)
    return True


def stack_functions(thread_ident: int) -> list[str]:
    """Function names of a Python thread of this process, innermost first."""
    frame = sys._current_frames().get(thread_ident)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return names


def ready_when(predicate: Callable[[], bool], info: Callable[[], dict] | None = None, timeout: float = 120.0) -> None:
    """Start a daemon thread that writes READY once ``predicate()`` holds, then exits.

    If the hang does not materialise in ``timeout`` seconds the thread logs why and exits without
    writing READY: the spawner then fails with this log's tail.
    """

    def watch() -> None:
        if wait_until(predicate, timeout=timeout):
            mark_ready(**(info() if info else {}))
        else:
            log(f"zoo: the hang was not reached within {timeout:.0f} s; READY not written")

    threading.Thread(target=watch, name="zoo-ready-watch", daemon=True).start()


def run_scenario(scenarios: dict) -> None:
    """Run the scenario named by the program's one argument, or exit with its usage."""
    program = os.path.basename(sys.argv[0])
    if len(sys.argv) != 2 or sys.argv[1] not in scenarios:
        sys.exit(f"usage: {program} {{{','.join(scenarios)}}}")
    scenarios[sys.argv[1]]()


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


def _main_sleeps_in(function: str) -> Callable[[], bool]:
    """Whether the main thread is in ``function`` and has slept for a few consecutive samples."""
    main = threading.main_thread()
    return lambda: function in stack_functions(main.ident) and sleeping_steadily(os.getpid(), main.native_id)


def _announce_when(rank: int, waiting: Callable[[], bool], then: Callable[[], None] | None = None) -> None:
    """A watch thread: once ``waiting()`` holds, write ``<workdir>/waiting-<rank>``, then ``then()``."""

    def watch() -> None:
        if not wait_until(waiting, timeout=120):
            return
        write_marker(f"waiting-{rank}")
        if then is not None:
            then()

    threading.Thread(target=watch, name="zoo-ready-watch", daemon=True).start()


def announce_rank_wait(rank: int, function: str, condition: Callable[[], bool] = lambda: True) -> None:
    """For a two-rank job: each rank writes ``<workdir>/waiting-<rank>`` once its main thread has slept
    in ``function`` for a few consecutive samples (and ``condition()`` holds: past the step where the
    hang starts, say); rank 0 then writes READY with both PIDs (``rank0_pid``, ``rank1_pid``)."""
    sleeps = _main_sleeps_in(function)

    def ready() -> None:
        if rank == 0 and wait_until(lambda: read_marker("waiting-1") is not None, timeout=120):
            mark_ready(rank0_pid=os.getpid(), rank1_pid=read_marker("waiting-1")["pid"])

    _announce_when(rank, lambda: condition() and sleeps(), ready)


def announce_shard_wait(rank: int, function: str, condition: Callable[[], bool] = lambda: True) -> None:
    """For a two-rank job where rank 1 blocks opening a FIFO shard: each rank writes
    ``<workdir>/waiting-<rank>`` once it is in its wait (``condition()`` holding): rank 1 in open() of
    the FIFO, rank 0 asleep in ``function`` for a few consecutive samples. READY comes from the
    launching process (ready_when_ranks_wait)."""
    main = threading.main_thread()

    def in_open_of_the_fifo() -> bool:
        return blocked_in(os.getpid(), main.native_id, ("wait_for_partner", "fifo_open"), ("open", "openat"))

    in_wait = in_open_of_the_fifo if rank == 1 else _main_sleeps_in(function)
    _announce_when(rank, lambda: condition() and in_wait())


def ready_when_ranks_wait(**extra) -> None:
    """READY (``rank0_pid``, ``rank1_pid`` and ``extra``) from the launching process, once both ranks
    have announced their wait (announce_shard_wait)."""

    def both_waiting() -> bool:
        return all(read_marker(f"waiting-{rank}") is not None for rank in (0, 1))

    def info() -> dict:
        pids = {rank: read_marker(f"waiting-{rank}")["pid"] for rank in (0, 1)}
        return {"rank0_pid": pids[0], "rank1_pid": pids[1], **extra}

    ready_when(both_waiting, info)


_SILENT_SERVER = r"""
import socket, sys, threading, time
reply = bytes.fromhex(sys.argv[1])
drip = int(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(8)
print(s.getsockname()[1], flush=True)
held = []

def drip_forever(c):
    while True:
        c.sendall(b"x" * drip)
        time.sleep(0.2)

while True:
    c, _ = s.accept()
    if reply:
        c.recv(65536)
        c.sendall(reply)
    if drip:
        threading.Thread(target=drip_forever, args=(c,), daemon=True).start()
    held.append(c)  # keeps the connection open and says nothing (more)
"""


def start_server_child(code: str, *args: str) -> tuple[subprocess.Popen, int]:
    """A server child running ``code`` (isolated: ``python -I -c``), which prints the port it listens on
    as its first line. Returns it and that port."""
    server = subprocess.Popen([sys.executable, "-I", "-c", code, *args], stdout=subprocess.PIPE, text=True)
    return server, int(server.stdout.readline())


def start_silent_server(reply: bytes = b"", drip: int = 0) -> tuple[subprocess.Popen, int]:
    """A local server (a child process) that accepts connections and never answers, or answers
    ``reply`` and then goes silent: a stuck tracker, object store or mirror. With ``drip``, it goes
    on sending that many bytes every 200 ms instead: a slow mirror. Returns it and its port."""
    return start_server_child(_SILENT_SERVER, reply.hex(), str(drip))


def shard_files(name: str, count: int, fifo_at: int, content: bytes = b"x" * 100) -> list[str]:
    """`count` files ``<workdir>/<name><i>.bin`` with `content`, except number `fifo_at`: a FIFO that no
    process writes (a shard a fetcher never streams), whose open() blocks its reader for ever."""
    paths = []
    for index in range(count):
        path = workdir() / f"{name}{index}.bin"
        if index == fifo_at:
            os.mkfifo(path, 0o600)
        else:
            path.write_bytes(content)
        paths.append(str(path))
    return paths


def child_blocked_in_open() -> int | None:
    """A child (at any depth) of this process that sleeps steadily in the open() of a FIFO."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        if blocked_in(child.pid, None, ("wait_for_partner", "fifo_open"), ("openat", "open")):
            if sleeping_steadily(child.pid):
                return child.pid
    return None
