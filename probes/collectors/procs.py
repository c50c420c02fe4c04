"""Find a job's processes, name their roles, and sample their state over a short window.

Everything here reads /proc (through psutil or directly) with a time bound: reading
/proc/P/cmdline or /proc/P/maps can block while a thread of P holds its memory lock in
uninterruptible sleep, which is exactly the state hung jobs are found in.
"""

from __future__ import annotations

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

import psutil

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.probes.collectors.freezer import freeze_files, is_frozen
from debug_stuck.probes.collectors.jobcontrol import in_background_of_its_terminal
from debug_stuck.probes.collectors.links import families_linked
from debug_stuck.probes.collectors.sigmask import blocked_and_held
from debug_stuck.redact import redact_env, redacted_command_line

PROC_READ_SECONDS = 2.0

RELEVANT_ENV = re.compile(
    r"^(NCCL_\w+|TORCH_\w+|TORCHELASTIC_\w+|TORCHINDUCTOR_\w+|PYTORCH_\w+|OMP_NUM_THREADS|MKL_NUM_THREADS|"
    r"MIOPEN_\w+|HSA_\w+|HIP_\w+|ROCR_\w+|CUDA_\w+|RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|"
    r"MASTER_ADDR|MASTER_PORT|TOKENIZERS_PARALLELISM|PYTHONUNBUFFERED|PYTHONFAULTHANDLER|ACCELERATE_\w+|"
    r"SLURM_JOB_ID|SLURM_PROCID|SLURM_NODEID|NODE_RANK|GLOO_\w+|TRITON_\w+|DEBUG_STUCK_\w+|RAY_ADDRESS|RAY_RAYLET_PID)$"
)
LAUNCHER = re.compile(
    r"torch\.distributed\.(run|launch)|(^|/)torchrun\b|accelerate(/commands/launch|\s+launch)|"
    r"(^|/)deepspeed\b|deepspeed\.launcher|torchelastic|lightning\s+run|(^|/)srun\b"
)
COMPILE_WORKER = re.compile(r"torch/_inductor/compile_worker|_inductor\.compile_worker|compile_worker/__main__")
# multiprocessing's spawn/forkserver children; joblib's loky workers (loky/backend/popen_loky_posix.py
# starts them as `python -m <that module> --process-name LokyProcess-N --pipe FD`)
SPAWNED_CHILD = re.compile(
    r"multiprocessing\.(spawn|forkserver)|from multiprocessing\.spawn import|loky\.backend\.popen_loky_posix"
)
# multiprocessing's helpers, also as the `multiprocess` fork (HF datasets) and joblib's loky backend ships them
HELPER_CHILD = re.compile(
    r"multiprocess(?:ing)?\.(?:resource_tracker|forkserver import main)|loky\.backend\.resource_tracker"
)


def is_library_helper(cmdline) -> bool:
    """multiprocessing's own helper processes (the resource tracker, the fork server): they sit in a
    pipe read for their whole life, so what they wait on says nothing about the job."""
    return bool(HELPER_CHILD.search(" ".join(cmdline or ())))


class InspectError(Exception):
    """A target cannot be inspected. kind: gone | permission | timeout | not-a-job; hint: what to
    give instead, where the message alone does not say."""

    def __init__(self, kind: str, message: str, hint: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.hint = hint


@dataclass
class ProcInfo:
    pid: int
    ppid: int
    name: str
    cmdline: List[str]
    role: str = "other"
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    world_size: Optional[int] = None
    env: Dict[str, str] = field(default_factory=dict)
    state: str = "?"
    threads: int = 0
    create_time: Optional[float] = None
    username: Optional[str] = None
    fd1: Optional[str] = None
    fd2: Optional[str] = None
    fd1_target: Optional[str] = None
    fd2_target: Optional[str] = None
    cpu_percent: Optional[float] = None
    cpu_demand: Optional[float] = None  # main thread: % of the window running or waiting for a CPU
    thread_demand: Dict[int, float] = field(default_factory=dict)  # the same for each thread (up to 64)
    cpu_system_percent: Optional[float] = None  # the part of cpu_percent spent in the kernel (system calls)
    minor_faults: Optional[int] = None  # page faults over the window: kernel time that memory, not system calls, took
    io_read_bytes: Optional[int] = None
    io_write_bytes: Optional[int] = None
    wchan: Optional[str] = None
    thread_wchans: Dict[int, str] = field(default_factory=dict)
    thread_names: List[str] = field(default_factory=list)  # the distinct names of its threads (/proc/P/task/T/comm)
    kernel_stack: Optional[List[str]] = None
    thread_kernel_stacks: Dict[int, List[str]] = field(default_factory=dict)
    waits: Dict[int, dict] = field(default_factory=dict)  # tid -> what it waits on (probes.collectors.waits)
    loads_torch: bool = False
    children: List[int] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    host: Optional[str] = None  # the node it runs on, set when snapshots of several nodes are merged
    cgroup: Optional[str] = None  # its cgroup (v2 path, or v1 memory controller's), to tie kernel lines to it
    exit_status: Optional[int] = None  # a zombie's wait status (/proc/PID/stat field 52): how it died
    main_wakes: Optional[dict] = None  # its main thread watched past the window (live.wakes): seconds, runs, ran_ms
    # outside the job's process tree, taken in because it holds the other end of a pipe this pid waits on
    adopted_by: Optional[int] = None
    signals_blocked: List[str] = field(default_factory=list)  # its main thread's mask (SigBlk)
    signals_held: List[str] = field(default_factory=list)  # pending while blocked: never delivered
    frozen: bool = False  # its cgroup is frozen (docker pause, SLURM suspend): nothing runs until thawed
    tty_background: bool = False  # stopped in a background group of its terminal: job control stopped it
    freeze_files: List[str] = field(default_factory=list)  # where its cgroups say so (probes.collectors.freezer)

    def cpu_wanted(self) -> Optional[float]:
        """CPU use as the job wants it, in percent of one CPU: the larger of what it got over the window
        and what its main thread asked for (running or waiting for a CPU); None when neither was read."""
        values = [v for v in (self.cpu_percent, self.cpu_demand) if v is not None]
        return max(values) if values else None

    @property
    def python(self) -> bool:
        head = " ".join(self.cmdline[:1]) + " " + self.name
        return "python" in head.lower()

    def label(self, role: Optional[str] = None) -> str:
        """ "pid 12 (rank 0)"; `role`: the role the evidence reads, where it differs from the tree's (a
        forked child that runs no DataLoader is a worker-process)."""
        role = role or self.role
        who = f"rank {self.rank}" if role == "rank" and self.rank is not None else role
        if self.host is not None:
            who += f", {self.host}"
        return f"pid {self.pid} ({who})"

    def to_dict(self) -> dict:
        return {
            "pid": self.pid,
            "ppid": self.ppid,
            "name": self.name,
            "cmdline": redacted_command_line(self.cmdline)[:500],
            "role": self.role,
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.world_size,
            "state": self.state,
            "cpu_percent": self.cpu_percent,
            "cpu_demand": self.cpu_demand,
            **({"thread_demand": {str(k): v for k, v in self.thread_demand.items()}} if self.thread_demand else {}),
            "cpu_system_percent": self.cpu_system_percent,
            "minor_faults": self.minor_faults,
            "thread_count": self.threads,
            "io_read_bytes": self.io_read_bytes,
            "io_write_bytes": self.io_write_bytes,
            "wchan": self.wchan,
            "thread_wchans": {str(k): v for k, v in self.thread_wchans.items()},
            "thread_names": self.thread_names,
            "kernel_stacks": {str(k): v for k, v in self.thread_kernel_stacks.items()},
            "waits": {str(k): v for k, v in self.waits.items()},
            "fd1": self.fd1,
            "fd2": self.fd2,
            "fd1_target": self.fd1_target,
            "fd2_target": self.fd2_target,
            "env": self.env,
            "children": self.children,
            "errors": self.errors,
            **({"host": self.host} if self.host is not None else {}),
            **({"cgroup": self.cgroup} if self.cgroup is not None else {}),
            **({"exit_status": self.exit_status} if self.exit_status is not None else {}),
            **({"main_wakes": self.main_wakes} if self.main_wakes is not None else {}),
            **({"adopted_by": self.adopted_by} if self.adopted_by is not None else {}),
            **({"signals_blocked": self.signals_blocked} if self.signals_blocked else {}),
            **({"signals_held": self.signals_held} if self.signals_held else {}),
            **({"frozen": True} if self.frozen else {}),
            **({"tty_background": True} if self.tty_background else {}),
        }


def _bounded(fn, what: str, default=None, errors: Optional[List[str]] = None):
    try:
        return call_with_timeout(fn, PROC_READ_SECONDS, what)
    except CallTimedOut as exc:
        if errors is not None:
            errors.append(f"{exc} (the process may be in uninterruptible sleep)")
        return default
    except (psutil.AccessDenied, PermissionError):
        if errors is not None:
            errors.append(f"{what}: permission denied (run as the job's user or root)")
        return default
    except (psutil.NoSuchProcess, psutil.ZombieProcess, FileNotFoundError, ProcessLookupError):
        return default
    except OSError as exc:
        if errors is not None:
            errors.append(f"{what}: {exc.strerror or exc}")
        return default


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read(65536)


def read_proc_file(path: str) -> Optional[str]:
    """A small /proc or /sys file's text, bounded in time; None when it cannot be read."""
    return _bounded(lambda: _read(path), f"reading {path}")


def process_uid(pid: int) -> Optional[int]:
    """The effective user id of process pid (/proc/PID/status), or None when it cannot be read."""
    for line in (read_proc_file(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            return int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else None
    return None


def _fd_kind(target: Optional[str]) -> Optional[str]:
    if target is None:
        return None
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("socket:"):
        return "socket"
    if target in ("/dev/null",):
        return "null"
    if target.startswith(("/dev/pts/", "/dev/tty", "/dev/console")):
        return "tty"
    if target.startswith("anon_inode:"):
        return "other"
    return "file"


def _int(value) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def read_process(pid: int) -> ProcInfo:
    """Static facts of one process. Raises InspectError when it is gone or not ours to read."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            ppid = proc.ppid()
            name = proc.name()
            create_time = proc.create_time()
            zombie = proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        raise InspectError("gone", f"process {pid} does not exist (it may have exited)") from None
    except psutil.AccessDenied:
        raise InspectError("permission", f"permission denied reading process {pid}") from None
    info = ProcInfo(pid=pid, ppid=ppid, name=name, cmdline=[], create_time=create_time)
    if zombie:
        info.state = "Z"  # a dead child: its cmdline, environ and fds are gone, say so and stop
        info.exit_status = zombie_exit_status(pid)
        return info
    errors = info.errors
    info.cmdline = _bounded(proc.cmdline, f"reading /proc/{pid}/cmdline", [], errors) or []
    info.username = _bounded(proc.username, f"reading the owner of {pid}", None)
    environ = _bounded(proc.environ, f"reading /proc/{pid}/environ", None, errors)
    if environ is not None:
        info.env = redact_env({k: v for k, v in environ.items() if RELEVANT_ENV.match(k)})
        info.rank = _int(environ.get("RANK"))
        info.local_rank = _int(environ.get("LOCAL_RANK"))
        info.world_size = _int(environ.get("WORLD_SIZE"))
    for fd in (1, 2):
        target = _bounded(lambda fd=fd: os.readlink(f"/proc/{pid}/fd/{fd}"), f"reading /proc/{pid}/fd/{fd}")
        setattr(info, f"fd{fd}", _fd_kind(target) if target is not None else "closed")
        setattr(info, f"fd{fd}_target", target)
    info.loads_torch = bool(_bounded(lambda: maps_mention(pid, "libtorch"), f"reading /proc/{pid}/maps", False))
    cgroups = read_proc_file(f"/proc/{pid}/cgroup") or ""
    info.cgroup = parse_cgroup(cgroups)
    info.freeze_files = freeze_files(cgroups)
    info.children = [c.pid for c in _bounded(proc.children, f"listing children of {pid}", []) or []]
    return info


def zombie_exit_status(pid: int) -> Optional[int]:
    """The wait status a zombie will hand its parent (proc(5): /proc/PID/stat field 52, exit_code,
    since Linux 3.5): the exit code in bits 8-15, the killing signal in bits 0-6."""
    text = read_proc_file(f"/proc/{pid}/stat") or ""
    fields = text.rsplit(")", 1)[-1].split()
    # fields[0] is field 3 (state): field 52 is fields[49]
    return _int(fields[49]) if len(fields) >= 50 else None


def parse_cgroup(text: str) -> Optional[str]:
    """The cgroup path from /proc/P/cgroup: the unified (v2) one, else the v1 memory controller's,
    which is the one the OOM killer names (task_memcg=)."""
    memory = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            return parts[2].strip() or None
        if "memory" in parts[1].split(","):
            memory = parts[2].strip() or None
    return memory


def nfs_servers(pid: int) -> List[str]:
    """The servers of the NFS mounts in pid's mount namespace (/proc/P/mountinfo: reading it does
    not touch the mounts, so a hung server cannot block it)."""
    text = read_proc_file(f"/proc/{pid}/mountinfo") or ""
    servers = []
    for line in text.splitlines():
        _, sep, tail = line.partition(" - ")
        fields = tail.split()
        if sep and len(fields) >= 2 and fields[0].startswith("nfs") and ":" in fields[1]:
            servers.append(fields[1].rsplit(":", 1)[0].strip("[]"))
    return list(dict.fromkeys(servers))


def maps_mention(pid: int, needle: str) -> bool:
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if needle in line:
                return True
    return False


def assign_roles(procs: Dict[int, ProcInfo]) -> None:
    """Name each process's role from its command line, environment and family."""
    for info in procs.values():
        cmd = " ".join(info.cmdline)
        parent = procs.get(info.ppid)
        if COMPILE_WORKER.search(cmd):
            info.role = "compile-worker"
        elif LAUNCHER.search(cmd) and info.children:
            info.role = "launcher"
        elif HELPER_CHILD.search(cmd):
            info.role = "other"
        elif parent is not None and parent.role in ("rank", "other") and parent.python and _is_worker_of(info, parent):
            info.role = "dataloader-worker"
        elif info.rank is not None or info.local_rank is not None:
            info.role = "rank"
        elif info.python and (parent is None or parent.role == "launcher" or not parent.python):
            info.role = "rank"  # a single-process trainer is its own rank
        else:
            info.role = "other"
        if info.role == "dataloader-worker" and parent is not None:
            # workers inherit RANK from their trainer; the rank is the parent's, not theirs
            info.rank = parent.rank
    _sidecars_beside_trainers(procs)


def _sidecars_beside_trainers(procs: Dict[int, ProcInfo]) -> None:
    """A launch script's sidecar (a metrics server, an uploader) started beside a trainer is not a
    rank: without RANK in anyone's environment, the processes that load torch are the trainers."""
    alone = [p for p in procs.values() if p.role == "rank" and p.rank is None and p.local_rank is None]
    if any(p.loads_torch for p in alone):
        for info in alone:
            if not info.loads_torch:
                info.role = "other"


def _is_worker_of(child: ProcInfo, parent: ProcInfo) -> bool:
    if child.state == "Z":
        return True  # a dead child of a trainer: almost always a worker that died
    cmd = " ".join(child.cmdline)
    return child.cmdline == parent.cmdline or bool(SPAWNED_CHILD.search(cmd))


def _order(procs: Iterable[ProcInfo]) -> List[ProcInfo]:
    role_order = {"launcher": 0, "rank": 1, "dataloader-worker": 2, "compile-worker": 3, "other": 4}
    return sorted(procs, key=lambda p: (role_order.get(p.role, 9), p.rank if p.rank is not None else -1, p.pid))


MAX_CLIMB = 8  # worker of a worker of... a trainer: more levels than any real job has


def trainer_of(pid: int, given: Iterable[int] = ()) -> Tuple[int, Optional[str]]:
    """The trainer process that `pid` works for, and a note on how it was found: a DataLoader
    worker (forked with its trainer's command line, or started by multiprocessing.spawn) leads to
    its trainer, so a worker's PID diagnoses the whole job. Raises InspectError when `pid` cannot
    be read or is no training job (see check_target; `given`: every PID the user named); a parent
    that cannot be read ends the climb."""
    info = read_process(pid)
    check_target(info, given)
    child_of = None
    if not info.python and info.ppid > 1 and not _python_roots_below(pid):
        # a program the job runs (find, a shell script, a compiler): its Python parent is the job
        try:
            parent = read_process(info.ppid)
            check_target(parent, given)  # not this tool's own parent (the shell or the Python that runs it)
        except InspectError:
            parent = None
        # never the Python that runs this tool (a test runner, a notebook that started both)
        if parent is not None and parent.python and parent.pid not in _my_ancestors():
            child_of, info = info, parent
    for _ in range(MAX_CLIMB):
        if info.ppid <= 1:
            break
        try:
            parent = read_process(info.ppid)
        except InspectError:
            break  # not ours to read, or gone: the job starts here
        if not parent.python or not _is_worker_of(info, parent):
            break
        info = parent
    if info.pid == pid:
        return pid, None
    if child_of is not None:
        return info.pid, (
            f"pid {pid} ({child_of.name}) runs no Python: a program the job started; reading the whole job from "
            f"pid {info.pid}"
        )
    return info.pid, f"pid {pid} is a worker process of pid {info.pid}: reading the whole job from pid {info.pid}"


# Processes that hold other people's work: named by --pid, they stand for no training job.
SESSION_HOLDER = re.compile(
    r"^(systemd|init|kthreadd|sshd|tmux.*|screen|login|su|sudo|containerd.*|dockerd|docker-init|tini|dumb-init|"
    r"slurmd|slurmstepd|jupyter.*|code-server|agetty|cron|supervisord)$"
)
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "tcsh", "csh", "ash"}
_GIVE_JOB = "give the PID of the training job (ps -eo pid,args | grep python), or use --auto"
_LISTED = 5


def check_target(info: ProcInfo, given: Iterable[int] = ()) -> None:
    """Raise InspectError unless the process the user named can stand for a training job. Refused:
    this debug-stuck and its parents (the shell that runs it) unless one is the job; a zombie,
    unless its parent was named too; init, a daemon or a login shell; a wrapper of several unrelated
    jobs. A non-Python process is taken as the launcher or wrapper (torchrun, srun, a job script) of
    the one job below it."""
    pid, name = info.pid, info.name
    if pid == os.getpid():
        raise InspectError("not-a-job", f"pid {pid} is debug-stuck itself, not a training job", _GIVE_JOB)
    if info.state == "Z":
        if info.ppid in set(given):
            return  # a dead worker of the trainer named beside it: evidence of the trainer's job
        raise InspectError(
            "gone",
            f"process {pid} has exited (zombie, not yet reaped by its parent {info.ppid})",
            f"give its parent's PID to diagnose the parent: --pid {info.ppid}",
        )
    holder = pid == 1 or bool(SESSION_HOLDER.match(name))  # better answered with the jobs below it
    if not holder and pid in _my_ancestors() and not (info.loads_torch or LAUNCHER.search(" ".join(info.cmdline))):
        what = "the shell that runs debug-stuck" if _shell(name) else "a parent process of this debug-stuck"
        raise InspectError("not-a-job", f"pid {pid} ({name}) is {what}, not a training job", _GIVE_JOB)
    if info.python and not holder:
        return
    if LAUNCHER.search(" ".join(info.cmdline)):
        return
    mine = _this_tool()
    roots = [(p, cmd) for p, cmd in _python_roots_below(pid) if p not in mine]
    jobs = len({_job_of(p, cmd) for p, cmd in roots})
    if jobs > 1 and not _holder_reason(info) and families_linked(pid, [_family(p) for p, _ in roots]):
        jobs = 1  # a launch script's trainer and sidecar, talking over a pipe or TCP
    if jobs > 1 and not _holder_reason(info) and split_rendezvous([p for p, _ in roots]):
        jobs = 1  # its ranks, given different MASTER_PORTs: the bug to diagnose, not two jobs
    reason = _holder_reason(info) or (f"it runs {jobs} unrelated jobs" if jobs > 1 else "")
    if not reason:
        return  # a wrapper of one job (or of none: then it is "not a Python process")
    shown = ", ".join(f"{p} ({redacted_command_line(cmd)[:60]})" for p, cmd in roots[:_LISTED])
    more = f" and {len(roots) - _LISTED} more" if len(roots) > _LISTED else ""
    below = f"Python processes below it: {shown}{more}" if roots else "no Python process runs below it"
    hint = "give the PID of the one to diagnose, or use --auto" if roots else _GIVE_JOB
    raise InspectError("not-a-job", f"pid {pid} ({name}) is not a training job: {reason}; {below}", hint)


def _shell(name: str) -> bool:
    return name.lstrip("-") in SHELLS


def _holder_reason(info: ProcInfo) -> str:
    name, args = info.name, info.cmdline[1:]
    if info.pid == 1:
        return "it is the first process of this machine or container (init)"
    if SESSION_HOLDER.match(name):
        return f"{name} holds other people's work"
    login = (info.cmdline[:1] or [""])[0].startswith("-")
    if _shell(name) and (login or not _runs_script(args)):
        return "it is an interactive or login shell"
    return ""


def _runs_script(args: List[str]) -> bool:
    """A shell given a script or a -c command (a job's wrapper), not one a person types into."""
    return "-c" in args or any(not a.startswith("-") for a in args)


def _my_ancestors() -> set:
    parents = _bounded(lambda: psutil.Process().parents(), "listing the parents of debug-stuck", []) or []
    return {p.pid for p in parents}


def _this_tool() -> set:
    """This debug-stuck and every process above it: never part of a job it inspects."""
    return {os.getpid()} | _my_ancestors()


def _python_roots_below(pid: int) -> List[Tuple[int, List[str]]]:
    """(pid, cmdline) of the top Python process of each family below pid, by PID."""

    def scan() -> Dict[int, dict]:
        below = {p.pid for p in psutil.Process(pid).children(recursive=True)}
        return {
            proc.info["pid"]: proc.info
            for proc in psutil.process_iter(["pid", "ppid", "name", "cmdline"])
            if proc.info["pid"] in below
        }

    found = _bounded(scan, f"listing the processes below {pid}", {}) or {}
    python = {p: i for p, i in found.items() if _looks_python(i["cmdline"] or [], i["name"] or "")}
    return [(p, i["cmdline"] or [i["name"] or "?"]) for p, i in sorted(python.items()) if i["ppid"] not in python]


def _family(pid: int) -> List[int]:
    below = _bounded(lambda: psutil.Process(pid).children(recursive=True), f"listing the children of {pid}", [])
    return [pid] + [p.pid for p in below or []]


def _job_of(pid: int, cmdline: List[str]) -> tuple:
    """What ties a family to its job; with nothing shared, ranks that mpirun or pdsh started side by
    side still run one command line."""
    key = job_key(pid)
    return ("command", tuple(cmdline)) if key[0] == "pid" else key


def _looks_python(cmdline: List[str], name: str) -> bool:
    return "python" in (" ".join(cmdline[:1]) + " " + name).lower()  # as ProcInfo.python


def job_processes(pids: List[int]) -> List[ProcInfo]:
    """The given processes, their launcher (when a parent is one) and all their descendants."""
    wanted: List[int] = []
    for pid in pids:
        if not psutil.pid_exists(pid):
            raise InspectError("gone", f"process {pid} does not exist (it may have exited)")
        wanted.append(pid)
        parent = _bounded(lambda pid=pid: psutil.Process(pid).parent(), f"finding the parent of {pid}")
        if parent is not None:
            cmd = " ".join(_bounded(parent.cmdline, f"reading the parent of {pid}", []) or [])
            if LAUNCHER.search(cmd):
                wanted.append(parent.pid)
    seen: Dict[int, ProcInfo] = {}
    queue = list(dict.fromkeys(wanted))
    # this debug-stuck, and the processes between it and the job (a harness that started both): never
    # part of the job, though they descend from its launcher
    mine = _this_tool() - set(wanted)
    while queue:
        pid = queue.pop(0)
        if pid in seen or pid in mine:
            continue
        try:
            info = read_process(pid)
        except InspectError:
            if pid in pids:
                raise
            continue  # a child that exited meanwhile
        seen[pid] = info
        queue.extend(c for c in info.children if c not in seen)
    assign_roles(seen)
    return _order(seen.values())


# Interpreter options that take a value as the next word (python -W error -X dev train.py).
_OPTION_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def program_of(cmdline: List[str]) -> tuple:
    """The interpreter and what it runs (`python train.py`, `python -m pkg`, `python -c CODE`),
    without the arguments; the interpreter's own options (-u, -B) are skipped, and a -c program's
    numbers folded (multiprocessing's spawn_main(pipe_handle=N) differs only there)."""
    if not cmdline:
        return ()
    i = 1
    while i < len(cmdline) and cmdline[i].startswith("-") and cmdline[i] not in ("-m", "-c"):
        i += 2 if cmdline[i] in _OPTION_WITH_VALUE else 1
    if i >= len(cmdline):
        return tuple(cmdline[:1])
    if cmdline[i] == "-m" and i + 1 < len(cmdline):
        return (cmdline[0], "-m", cmdline[i + 1])
    if cmdline[i] == "-c" and i + 1 < len(cmdline):
        return (cmdline[0], "-c", re.sub(r"\d+", "#", cmdline[i + 1]))
    return (cmdline[0], cmdline[i])


def launcher_script_of(pid: int) -> Optional[Tuple[int, str, int]]:
    """(parent pid, its command line, how many copies) when pid's parent is a Python process that
    started two or more copies of pid's program, each with arguments of its own: a launcher script
    of the job's own, or a sweep that runs independent trials. Which one, only the user knows, so
    the siblings are not taken on their own (see resolve_targets' note)."""
    parent = _bounded(lambda: psutil.Process(pid).parent(), f"finding the parent of {pid}")
    if parent is None:
        return None
    cmdline = _bounded(parent.cmdline, f"reading the parent of {pid}", []) or []
    copies = _launches_copies(parent, cmdline, pid)
    return (parent.pid, " ".join(cmdline), copies) if copies >= 2 else None


def _launches_copies(parent, parent_cmdline: List[str], pid: int) -> int:
    """How many of a Python parent's children run pid's program with arguments other than the
    parent's own (a forked worker has its trainer's command line); 0 for a shell, from which a user
    may start unrelated runs of one script."""
    if "python" not in " ".join(parent_cmdline[:1]).lower():
        return 0
    children = _bounded(parent.children, f"listing the children of {parent.pid}", []) or []
    lines = [_bounded(child.cmdline, f"reading pid {child.pid}", []) or [] for child in children]
    mine = next((line for child, line in zip(children, lines) if child.pid == pid), None)
    if not mine or mine == parent_cmdline:
        return 0
    return len([line for line in lines if line and program_of(line) == program_of(mine) and line != parent_cmdline])


def find_training_processes() -> List[int]:
    """Python processes that load libtorch, reduced to the roots of their families."""
    candidates = set()
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        pid = proc.info["pid"]
        if pid == me:
            continue
        head = " ".join((proc.info.get("cmdline") or [])[:1]) + " " + (proc.info.get("name") or "")
        if "python" not in head.lower():
            continue
        if _bounded(lambda pid=pid: maps_mention(pid, "libtorch"), f"reading /proc/{pid}/maps", False):
            candidates.add(pid)
    roots = []
    for pid in sorted(candidates):
        parent = _bounded(lambda pid=pid: psutil.Process(pid).ppid(), f"parent of {pid}", None)
        if parent not in candidates:
            roots.append(pid)
    # Oldest first: a hung job is usually the one that has been running for a while.
    return sorted(roots, key=lambda pid: _bounded(lambda: psutil.Process(pid).create_time(), f"age of {pid}", 0.0))


def job_key(pid: int) -> tuple:
    """What the processes of one job share, whoever launched them: the Slurm job (and step), the
    torchelastic run, or the rendezvous address of a multi-rank job; else the process itself."""
    env = _bounded(lambda: psutil.Process(pid).environ(), f"reading /proc/{pid}/environ", None) or {}
    if env.get("SLURM_JOB_ID") and (env.get("RANK") or env.get("SLURM_PROCID")):
        return ("slurm", env["SLURM_JOB_ID"], env.get("SLURM_STEP_ID", ""))
    # "none" is torchrun's default --rdzv-id (torch 2.13.0 torch/distributed/run.py), shared by every job
    # started without one: it names no job, its rendezvous address does
    if env.get("TORCHELASTIC_RUN_ID") and env["TORCHELASTIC_RUN_ID"] != "none":
        return ("torchelastic", env["TORCHELASTIC_RUN_ID"])
    world = _int(env.get("WORLD_SIZE"))
    if env.get("MASTER_PORT") and world and world > 1:
        return ("rendezvous", env.get("MASTER_ADDR", "127.0.0.1"), env["MASTER_PORT"], world)
    return ("pid", pid)


def split_rendezvous(pids: List[int]) -> bool:
    """Sibling processes (one parent) that run one command line with one WORLD_SIZE above 1 and
    distinct RANKs, but do not agree on MASTER_ADDR:MASTER_PORT: the ranks of one job whose launch
    gave them different rendezvous addresses (a port changed on one line of a launch script), not
    unrelated jobs. Each rank then waits for the others at its own address."""

    def read(pid: int):
        proc = psutil.Process(pid)
        with proc.oneshot():
            return proc.ppid(), tuple(proc.cmdline()), proc.environ()

    seen = [_bounded(lambda pid=pid: read(pid), f"reading /proc/{pid}", None) for pid in pids]
    if len(seen) < 2 or any(s is None for s in seen):
        return False
    ranks = [_int(env.get("RANK")) for _, _, env in seen]
    return (
        len({(ppid, cmd, env.get("WORLD_SIZE")) for ppid, cmd, env in seen}) == 1
        and (_int(seen[0][2].get("WORLD_SIZE")) or 0) > 1
        and None not in ranks
        and len(set(ranks)) == len(ranks)
        and len({(env.get("MASTER_ADDR"), env.get("MASTER_PORT")) for _, _, env in seen}) > 1
    )


def describe_job_key(key: tuple) -> str:
    if key[0] == "slurm":
        return f"Slurm job {key[1]}" + (f" step {key[2]}" if key[2] else "")
    if key[0] == "torchelastic":
        return f"torchelastic run {key[1]}"
    if key[0] == "rendezvous":
        return f"MASTER_ADDR:MASTER_PORT {key[1]}:{key[2]}, WORLD_SIZE {key[3]}"
    return f"process {key[1]}"


def group_jobs(roots: List[int]) -> List[Tuple[tuple, List[int]]]:
    """Training process trees grouped into jobs by what they share (see job_key), distributed jobs
    first, then the oldest first:
    ranks that srun, mpirun or a shell started side by side have no common launcher process."""
    groups: Dict[tuple, List[int]] = {}
    for pid in roots:
        groups.setdefault(job_key(pid), []).append(pid)
    # A job whose ranks say they are one (Slurm, torchelastic, a rendezvous address) before a lone
    # Python process that happens to load torch (a notebook, a test runner); oldest first in each.
    return sorted(groups.items(), key=lambda item: item[0][0] == "pid")


def shm_usage() -> Optional[Dict[str, float]]:
    def stat():
        st = os.statvfs("/dev/shm")
        total = st.f_blocks * st.f_frsize
        free = st.f_bavail * st.f_frsize
        return {"total": total, "used": total - free, "ratio": round((total - free) / total, 3) if total else 0.0}

    return _bounded(stat, "reading /dev/shm usage", None)


@dataclass
class _Counters:
    cpu: Optional[float]
    read: Optional[int]
    write: Optional[int]
    at: float
    system: Optional[float] = None
    faults: Optional[int] = None


def _minor_faults(pid: int) -> Optional[int]:
    """The process's minor page faults so far (proc(5): /proc/PID/stat field 10, minflt), or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
        return int(stat[stat.rindex(")") + 2 :].split()[7])
    except (OSError, ValueError, IndexError):
        return None


def _counters(pid: int) -> _Counters:
    def read():
        proc = psutil.Process(pid)
        times = proc.cpu_times()
        try:
            io = proc.io_counters()
            rd, wr = (
                io.read_chars if hasattr(io, "read_chars") else io.read_bytes,
                getattr(io, "write_chars", io.write_bytes),
            )
        except (psutil.AccessDenied, AttributeError):
            rd = wr = None
        return _Counters(times.user + times.system, rd, wr, time.monotonic(), times.system, _minor_faults(pid))

    return _bounded(read, f"reading counters of {pid}", _Counters(None, None, None, time.monotonic()))


def writes_over(pids, gap: float = 0.5) -> Dict[int, Optional[int]]:
    """{pid: bytes it wrote (write and send calls) in one `gap` of seconds}, from two bounded readings
    of each process's I/O counters; None where they cannot be read (gone, no rights)."""
    first = {pid: _counters(pid) for pid in pids}
    time.sleep(gap)
    out: Dict[int, Optional[int]] = {}
    for pid, before in first.items():
        after = _counters(pid)
        out[pid] = None if before.write is None or after.write is None else max(0, after.write - before.write)
    return out


def _state(info: ProcInfo) -> None:
    pid = info.pid
    status = _bounded(lambda: _read(f"/proc/{pid}/status"), f"reading /proc/{pid}/status", None, info.errors)
    if status is None:
        if not psutil.pid_exists(pid):
            info.state = "X"
        return
    m = re.search(r"^State:\s+(\w)", status, re.M)
    info.state = m.group(1) if m else "?"
    if info.state == "Z" and info.exit_status is None:
        info.exit_status = zombie_exit_status(pid)
    m = re.search(r"^Threads:\s+(\d+)", status, re.M)
    info.threads = int(m.group(1)) if m else 0
    info.signals_blocked, info.signals_held = blocked_and_held(status)
    info.frozen = info.state in ("D", "S") and is_frozen(info.freeze_files)
    info.tty_background = info.state == "T" and in_background_of_its_terminal(pid)
    info.wchan = _bounded(lambda: _read(f"/proc/{pid}/wchan").strip() or None, f"reading /proc/{pid}/wchan")
    if info.wchan == "0":
        info.wchan = None
    # Each thread's state, wait channel and system call, in one pass: read now, before a stack
    # reader attaches and interrupts a blocked call (resolved to objects later, by resolve_waits).
    from debug_stuck.probes.collectors.waits import MAX_THREADS, read_syscalls

    states: Dict[int, tuple] = {}
    raw = _bounded(lambda: read_syscalls(pid, states), f"system calls of {pid}", {}, info.errors) or {}
    info.waits = {tid: wait.to_dict(with_args=True) for tid, wait in raw.items()}
    info.thread_names = sorted({name for _, _, name in states.values() if name})
    for tid, (thread_state, wchan, _) in list(states.items())[:MAX_THREADS]:
        if wchan:
            info.thread_wchans[tid] = wchan
        # Kernel stacks (root only) of the main thread and of threads in uninterruptible sleep.
        if tid == pid or thread_state == "D":
            stack = _bounded(lambda tid=tid: _read(f"/proc/{pid}/task/{tid}/stack"), f"kernel stack of {pid}/{tid}")
            if stack:
                frames = [ln.split("]", 1)[-1].strip() for ln in stack.splitlines() if ln.strip()][:24]
                info.thread_kernel_stacks[tid] = frames
    info.kernel_stack = info.thread_kernel_stacks.get(pid)


def read_states(procs: List[ProcInfo], max_workers: int = 16) -> None:
    """State, thread count and wait channels. Read these before any stack dump: attaching py-spy
    interrupts a blocked system call, and for a moment the thread looks runnable with no wchan."""
    if procs:
        with ThreadPoolExecutor(max_workers=min(max_workers, len(procs)), thread_name_prefix="procs") as pool:
            list(pool.map(_state, procs))


def _schedstat(path: str) -> float:
    """Seconds a thread ran plus waited for a CPU (its schedstat file): under load a spinning process
    still wants a whole core even when it gets only part of one, so this tells spinning from sleeping."""
    with open(path) as fh:
        run_ns, wait_ns = fh.read().split()[:2]
    return (int(run_ns) + int(wait_ns)) / 1e9


MAX_TASKS = 64


def _task_schedstats(pid: int) -> Dict[int, float]:
    """_schedstat of each thread, the main thread first, then the others up to MAX_TASKS: a pool's
    threads taking turns at the GIL, or sharing a CPU with another job, each get part of one; what
    they ran and waited for tells they compute."""
    others = sorted(int(n) for n in os.listdir(f"/proc/{pid}/task") if int(n) != pid)[: MAX_TASKS - 1]
    out: Dict[int, float] = {}
    for tid in [pid, *others]:
        try:
            out[tid] = _schedstat(f"/proc/{pid}/task/{tid}/schedstat")
        except (OSError, ValueError):
            continue
    return out


def sample_window(procs: List[ProcInfo], window: float = 1.0, max_workers: int = 16) -> None:
    """Fill CPU% and I/O deltas: counters read at both ends of the window, in parallel."""
    if not procs:
        return
    workers = min(max_workers, len(procs))

    def read(p):
        return _counters(p.pid), _bounded(lambda: _task_schedstats(p.pid), f"reading /proc/{p.pid}/task/*/schedstat")

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="procs") as pool:
        before = dict(zip([p.pid for p in procs], pool.map(read, procs)))
        time.sleep(window)
        after = dict(zip([p.pid for p in procs], pool.map(read, procs)))
    for info in procs:
        (a, ta), (b, tb) = before[info.pid], after[info.pid]
        ta, tb = ta or {}, tb or {}
        elapsed = max(1e-3, b.at - a.at)
        if a.cpu is not None and b.cpu is not None:
            info.cpu_percent = round(100.0 * (b.cpu - a.cpu) / elapsed, 1)
        if a.system is not None and b.system is not None:
            info.cpu_system_percent = round(100.0 * (b.system - a.system) / elapsed, 1)
        if a.faults is not None and b.faults is not None:
            info.minor_faults = b.faults - a.faults
        info.thread_demand = {
            tid: round(min(100.0, 100.0 * (tb[tid] - ta[tid]) / elapsed), 1) for tid in ta if tid in tb
        }
        info.cpu_demand = info.thread_demand.get(info.pid)  # the main thread's
        if a.read is not None and b.read is not None:
            info.io_read_bytes = b.read - a.read
            info.io_write_bytes = b.write - a.write


def read_process_environ(pid: int) -> Dict[str, str]:
    """The job-relevant environment of a process (secrets redacted). Raises InspectError."""
    try:
        environ = call_with_timeout(lambda: psutil.Process(pid).environ(), PROC_READ_SECONDS, f"environ of {pid}")
    except psutil.NoSuchProcess:
        raise InspectError("gone", f"process {pid} does not exist (it may have exited)") from None
    except (psutil.AccessDenied, PermissionError):
        raise InspectError("permission", f"permission denied reading the environment of process {pid}") from None
    except CallTimedOut as exc:
        raise InspectError("timeout", str(exc)) from None
    return redact_env({k: v for k, v in environ.items() if RELEVANT_ENV.match(k)})


_LIMIT_NAMES = {"Max open files": "nofile", "Max locked memory": "memlock", "Max processes": "nproc"}


def read_process_limits(pid: int) -> Dict[str, Optional[int]]:
    """Soft resource limits of a process from /proc/P/limits (-1 = unlimited)."""
    text = _bounded(lambda: _read(f"/proc/{pid}/limits"), f"reading /proc/{pid}/limits", "") or ""
    out: Dict[str, Optional[int]] = {}
    for line in text.splitlines():
        for label, key in _LIMIT_NAMES.items():
            if line.startswith(label):
                soft = line[len(label) :].split()[0]
                out[key] = -1 if soft == "unlimited" else _int(soft)
    return out
