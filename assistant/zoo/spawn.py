"""Start the zoo's hanging programs as real process trees, and always clean them up.

``start(name, tmp_path)`` runs ``assistant/zoo/<name>.py`` in a new session (its own process group), with
``ZOO_WORKDIR`` set to a private directory under ``tmp_path`` and the program's stdout and stderr
appended to ``<workdir>/log.txt``; it returns once the program has written ``<workdir>/READY``
(each program writes it when its hang is real, see the docstring at the top of each program), and
raises ``ZooStartError`` with the log's tail if that does not happen in time. Any failure inside
``start`` stops what it started.

Special names:
- ``gloo_straggler``: launched by ``python -m torch.distributed.run --nproc_per_node=2`` on a free
  port; the launcher is the top process and the two ranks (``job.rank(0)``, ``job.rank(1)``) are
  started by it in sessions of their own, outside the job's process group.
- ``rendezvous_missing_rank``: run with ``RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=<free>``.
- ``sleep``: a non-Python process (``sleep 1000``); no READY is awaited.
- ``argv=[...]``: any command, under the label ``name``; no READY is awaited unless ``wait_ready=True``.

``ZooJob.stop()`` freezes the whole tree (SIGSTOP, top down, so that nothing can fork behind its
back), then SIGKILLs the process group and every process of the tree it has seen by PID (the
torchrun ranks escape the group), reaps the top process and waits until none of them is alive
(zombies left to init count as dead). It never looks processes up by name, and a PID is only
signalled after psutil has checked it still belongs to the process seen (PID reuse).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import psutil

from . import _common

ZOO_DIR = Path(__file__).resolve().parent
_NOT_PROGRAMS = {"spawn", "fixtures", "__init__", "demo"}
PROGRAMS = tuple(
    sorted(p.stem for p in ZOO_DIR.glob("*.py") if not p.stem.startswith("_") and p.stem not in _NOT_PROGRAMS)
)
NATIVE = {"sleep": ("sleep", "1000")}
TORCHRUN = {
    "gloo_straggler",
    "ddp_workers",
    "gloo_ranks",
    "hf_trainer_callback",
    "rank_waits",
    "accelerate_gather",
    "ddp_uneven",
    "ddp_long_backward",
}
ENV_RENDEZVOUS = {"rendezvous_missing_rank"}
# inherited variables that would change what a program does
_SCRUB = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")

_LIVE: dict[int, ZooJob] = {}


free_port = _common.free_port


class ZooStartError(RuntimeError):
    """The program did not reach its hang (no READY in time, or it exited first)."""


def is_alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (a zombie left to init is dead for our purposes)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def proc_state(pid: int, tid: int | None = None) -> str:
    """One-letter kernel state (R, S, D, T, t, Z...) of a process or thread, "" when gone."""
    try:
        stat = Path(f"/proc/{pid}/task/{tid or pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2 :].split()[0]


def wchan(pid: int, tid: int | None = None) -> str:
    """Kernel function a thread sleeps in ("" when unreadable, "0" when running or hidden)."""
    try:
        return Path(f"/proc/{pid}/task/{tid or pid}/wchan").read_text().strip()
    except OSError:
        return ""


def _tail(path: Path | None, limit: int = 4000) -> str:
    if path is None:
        return ""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"(no log: {exc})"
    return data[-limit:].decode("utf-8", "replace")


@dataclass(eq=False)
class ZooJob:
    name: str
    proc: subprocess.Popen
    pgid: int
    workdir: Path
    log: Path | None
    info: dict = field(default_factory=dict)  # READY's content, plus what the spawner chose (master_port)
    _seen: dict = field(default_factory=dict, repr=False)
    _log_file: Any = field(default=None, repr=False)
    stopped: bool = False

    # -- the tree -----------------------------------------------------------------------------
    def processes(self) -> list[psutil.Process]:
        """The top process and its live descendants, plus any process of the tree seen earlier that
        is still alive (an orphan reparented to init, e.g. a rank whose launcher died)."""
        found: dict[int, psutil.Process] = {}
        if self.proc.poll() is None:
            try:
                top = psutil.Process(self.proc.pid)
                found[top.pid] = top
                for child in top.children(recursive=True):
                    found[child.pid] = child
            except psutil.Error:
                pass
        for pid, proc in list(self._seen.items()):
            if pid not in found and is_alive(proc):
                found[pid] = proc
        for pid, proc in found.items():
            old = self._seen.get(pid)
            if old is None or old != proc:  # psutil compares pid and creation time
                self._seen[pid] = proc
        live = [p for p in found.values() if is_alive(p)]
        return sorted(live, key=lambda p: (p.pid != self.proc.pid, p.pid))

    def pids(self) -> list[int]:
        """PIDs of the whole live tree, the top process first."""
        return [p.pid for p in self.processes()]

    def find(self, predicate: Callable[[psutil.Process], bool]) -> list[psutil.Process]:
        """Processes of the tree for which ``predicate`` holds (psutil errors count as no)."""
        out = []
        for proc in self.processes():
            try:
                if predicate(proc):
                    out.append(proc)
            except (psutil.Error, KeyError, ValueError, OSError):
                pass
        return out

    def rank(self, rank: int) -> psutil.Process:
        """The process whose environment says ``RANK=<rank>`` (not its DataLoader workers)."""
        found = self.find(lambda p: p.environ().get("RANK") == str(rank))
        pids = {p.pid for p in found}
        roots = [p for p in found if p.ppid() not in pids]
        if len(roots) != 1:
            raise LookupError(f"{self.name}: {len(roots)} processes with RANK={rank} in {self.pids()}")
        return roots[0]

    def children_of(self, pid: int) -> list[psutil.Process]:
        return self.find(lambda p: p.ppid() == pid)

    def log_text(self) -> str:
        return _tail(self.log, limit=1 << 20)

    # -- signals ------------------------------------------------------------------------------
    def _group_alive(self) -> bool:
        if self.proc.poll() is None:  # not reaped: its PID, hence the group id, is still ours
            return True
        for proc in self._seen.values():
            try:
                if is_alive(proc) and os.getpgid(proc.pid) == self.pgid:
                    return True
            except OSError:
                pass
        return False

    def _freeze(self) -> list[psutil.Process]:
        if self._group_alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signal.SIGSTOP)
        frozen: set[int] = set()
        procs: list[psutil.Process] = []
        for _ in range(20):
            procs = self.processes()
            new = [p for p in procs if p.pid not in frozen]
            if not new:
                break
            for proc in new:
                with contextlib.suppress(psutil.Error):
                    proc.suspend()
                frozen.add(proc.pid)
        return procs

    def stop(self, timeout: float = 15.0) -> None:
        """SIGKILL the whole tree and wait until none of it is alive. Idempotent."""
        victims = self._freeze()
        if self._group_alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signal.SIGKILL)
        for proc in {p.pid: p for p in [*victims, *self._seen.values()]}.values():
            with contextlib.suppress(psutil.Error):
                proc.kill()  # psutil refuses if the PID now belongs to another process
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=timeout)
        deadline = time.monotonic() + timeout
        while any(is_alive(p) for p in self._seen.values()) and time.monotonic() < deadline:
            time.sleep(0.02)
        for stream in (self.proc.stdout, self.proc.stderr, self.proc.stdin, self._log_file):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.stopped = True
        _LIVE.pop(id(self), None)
        left = [p.pid for p in self._seen.values() if is_alive(p)]
        if left or self.proc.poll() is None:
            raise RuntimeError(f"{self.name}: processes still alive after SIGKILL: {left or [self.proc.pid]}")

    def signal_all(self, sig: int, pid: int | None = None) -> list[int]:
        targets = [p for p in self.processes() if pid is None or p.pid == pid]
        for proc in targets:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
        return [p.pid for p in targets]


def stop_signal(job: ZooJob, pid: int | None = None, timeout: float = 10.0) -> list[int]:
    """SIGSTOP the job's processes (or just ``pid``) and wait until the kernel shows them stopped (T).

    Nothing needs to resume them before ``job.stop()``: SIGKILL ends stopped processes too.
    """
    pids = job.signal_all(signal.SIGSTOP, pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(proc_state(p) in ("T", "t", "") for p in pids):
            return pids
        time.sleep(0.02)
    raise TimeoutError(f"{job.name}: not stopped after {timeout} s: {[(p, proc_state(p)) for p in pids]}")


def continue_signal(job: ZooJob, pid: int | None = None) -> list[int]:
    """SIGCONT the job's processes (or just ``pid``)."""
    return job.signal_all(signal.SIGCONT, pid)


def _command(name: str, argv: Sequence[str] | None, args: Sequence[str], nproc: int) -> tuple[list, dict, dict, bool]:
    """(command, extra env, extra info, whether READY is awaited by default)."""
    if argv is not None:
        return [str(a) for a in argv], {}, {}, False
    if name in NATIVE:
        return list(NATIVE[name]), {}, {}, False
    if name not in PROGRAMS:
        raise ValueError(f"unknown zoo program {name!r}; valid: {', '.join(PROGRAMS + tuple(NATIVE))}")
    script = str(ZOO_DIR / f"{name}.py")
    if name in TORCHRUN:
        port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={nproc}",
            "--master_addr=127.0.0.1",
            f"--master_port={port}",
            script,
            *args,
        ]
        return cmd, {"GLOO_SOCKET_IFNAME": "lo"}, {"master_port": port, "world_size": nproc}, True
    if name in ENV_RENDEZVOUS:
        port = free_port()
        env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        env["GLOO_SOCKET_IFNAME"] = "lo"
        return [sys.executable, script, *args], env, {"master_port": port, "world_size": 2}, True
    return [sys.executable, script, *args], {}, {}, True


def start(
    name: str,
    tmp_path: Path,
    ready_timeout: float = 60.0,
    *,
    stdout: str = "log",
    env: dict | None = None,
    args: Sequence[str] = (),
    argv: Sequence[str] | None = None,
    wait_ready: bool | None = None,
    nproc_per_node: int = 2,
    on_spawn: Callable[[ZooJob], Any] | None = None,
) -> ZooJob:
    """Start zoo program ``name`` and wait until it is in its hang (``<workdir>/READY``).

    ``stdout``: ``"log"`` (stdout and stderr appended to ``<workdir>/log.txt``) or ``"pipe"`` (stdout
    is a pipe that nobody reads, kept open until ``stop``; stderr still goes to the log).
    ``env``: extra environment (wins over the spawner's). ``args``: extra program arguments.
    ``on_spawn(job)`` is called as soon as the process exists, before waiting (cleanup registration).
    """
    if stdout not in ("log", "pipe"):
        raise ValueError(f"stdout must be 'log' or 'pipe', not {stdout!r}")
    cmd, extra_env, extra_info, default_wait = _command(name, argv, args, nproc_per_node)
    wait = default_wait if wait_ready is None else wait_ready
    tmp_path = Path(tmp_path)
    tmp_path.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_path))
    log = workdir / "log.txt"

    full_env = {k: v for k, v in os.environ.items() if k not in _SCRUB and not k.startswith("TORCHELASTIC_")}
    full_env.update({"ZOO_WORKDIR": str(workdir), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    full_env.update(extra_env)
    full_env.update(env or {})

    log_file = open(log, "ab")  # noqa: SIM115 - owned by the job, closed in stop(); append: ranks share it
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout == "pipe" else log_file,
            stderr=log_file,
            start_new_session=True,
        )
    except BaseException:
        log_file.close()
        raise
    job = ZooJob(name=name, proc=proc, pgid=proc.pid, workdir=workdir, log=log, info=dict(extra_info))
    job._log_file = log_file
    _LIVE[id(job)] = job
    try:
        job.processes()  # remember the top process
        if on_spawn is not None:
            on_spawn(job)
        if wait:
            job.info.update(_wait_ready(job, ready_timeout))
        return job
    except BaseException:
        job.stop()
        raise


def _wait_ready(job: ZooJob, timeout: float) -> dict:
    ready = job.workdir / "READY"
    deadline = time.monotonic() + timeout
    info = None
    while True:
        job.processes()  # keep track of the tree while it grows
        if info is None and ready.exists():
            try:
                info = json.loads(ready.read_text())
            except ValueError:
                info = {}
        if info is not None and _confirmed(info.get("kernel_wait")):
            return info
        code = job.proc.poll()
        if code is not None:
            raise ZooStartError(f"{job.name} exited with code {code} before READY; log tail:\n{_tail(job.log)}")
        if time.monotonic() > deadline:
            what = "READY" if info is None else f"the kernel wait {info.get('kernel_wait')}"
            raise ZooStartError(f"{job.name}: no {what} after {timeout:.0f} s; log tail:\n{_tail(job.log)}")
        time.sleep(0.05)


def _confirmed(kernel_wait: dict | None) -> bool:
    """READY may ask the spawner to confirm a kernel wait the program could not see itself (its
    blocked call holds the GIL): ``{"pid", "tid", "wchan": [...], "syscalls": [...]}``."""
    if not kernel_wait:
        return True
    return _common.blocked_in(
        kernel_wait["pid"],
        kernel_wait.get("tid"),
        tuple(kernel_wait.get("wchan", ())),
        tuple(kernel_wait.get("syscalls", ())),
    )


@contextlib.contextmanager
def running(name: str, tmp_path: Path, **options) -> Iterator[ZooJob]:
    """``with running("future_result", tmp_path) as job:`` -- the job is always stopped on exit."""
    job = start(name, tmp_path, **options)
    try:
        yield job
    finally:
        job.stop()


@atexit.register
def _stop_leftovers() -> None:
    for job in list(_LIVE.values()):
        with contextlib.suppress(Exception):
            job.stop()
