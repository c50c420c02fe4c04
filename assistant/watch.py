"""The watchdog: run (or attach to) a training job, notice within seconds when it stops moving, act.

Progress is the step counter in the job's log (probes.logtail.parse_progress on every new line).
Everything else the watcher can see cheaply is *activity*: the log growing without a new step, the
process tree using CPU or doing I/O, the main thread's Python stack changing between two samples,
the job's GPUs being busy. Activity alone never proves a training job is healthy (a spinning NCCL
wait is busy too), so once steps flow only the step counter resets the stall clock; activity
matters before the first steps (start-up: imports, compile, data) and during a recognised long
phase (checkpoint save, validation), which gets its own, larger allowance as long as it shows
signs of life.

The threshold adapts to the job: ``max(floor, multiple x median interval, 2 x longest recent
interval)`` between step observations, so a slow job is not a hung one. Stacks are sampled (py-spy,
Python frames only) only when no step was seen for half the threshold, so watching costs almost
nothing while the job steps.

On a stall the watcher writes the diagnosis report (Markdown + JSON), records the incident in the
journal, and then reports only, stops the job, or stops and restarts it from its last good
checkpoint (assistant.recovery), refusing to loop when the restarted job stalls again without
getting past the step of the previous incident.

Everything the watcher does is told through events (plain dicts, see ``EVENTS``), so the CLI can
print them as text or as one JSON object per line.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import statistics
import subprocess
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import psutil

from assistant.errors import BadInput, NotInspectable
from probes.bounded import CallTimedOut, call_with_timeout

EVENTS = (
    "started",
    "progress",
    "phase",
    "stall",
    "report",
    "action",
    "restarted",
    "resumed",
    "gave-up",
    "exited",
    "warning",
)
ON_HANG = ("report", "stop", "restart")

DEFAULT_POLL = 1.0
DEFAULT_FLOOR = 10.0
DEFAULT_MULTIPLE = 8.0
DEFAULT_PHASE_MULTIPLE = 30.0
DEFAULT_STARTUP = 300.0
DEFAULT_MAX_RESTARTS = 3
DEFAULT_GRACE = 10.0
DEFAULT_PROGRESS_EVERY = 60.0
DEFAULT_REPORT_DIR = "debug-stuck-reports"

# Exit status when the job stalled and watch ended it (--on-hang stop, or restart gave up);
# `timeout` uses the same number for "the command ran out of time".
EXIT_STALLED = 124

INTERVAL_HISTORY = 50
RECENT_INTERVALS = 20  # "the longest recent interval" looks this far back
TICK = 0.25  # the log is followed (and echoed) this often; everything else once per poll
TREE_REFRESH_SECONDS = 5.0  # how often the process tree is re-listed
GPU_EVERY_SECONDS = 5.0
STACK_MIN_EVERY = 2.0
STACK_TIMEOUT = 3.0
MAX_STACK_PROCESSES = 8
CPU_ACTIVE_PERCENT = 10.0  # the tree's CPU use (% of one core) above which it counts as doing something
IO_ACTIVE_BYTES_PER_SECOND = 64 * 1024
GPU_ACTIVE_UTIL = 5.0
MAX_READ_PER_TICK = 1 << 20
MAX_PARTIAL_LINE = 64 * 1024
DIAGNOSIS_SECONDS = 90.0
RESUME_PLAN_SECONDS = 30.0
FILE_SECONDS = 5.0
JOURNAL_LOOKBACK_SECONDS = 7 * 86400  # earlier stalls of the same command this recent tell same-step from random

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

# A long validation or sampling phase, recognised from function names on the main thread. The
# checkpoint phase comes from the checkpoint-save playbook's stack signals (see phase_of).
VALIDATION_FUNCTION = re.compile(
    r"^(validate\w*|validation\w*|_?evaluate\w*|evaluation\w*|run_eval\w*|eval_(loop|step|epoch|model)\w*|"
    r"_run_eval\w*|prediction_step|test_step|val_step|_?validation_loop|log_validation|sample_images\w*)$",
    re.I,
)
VALIDATION_FILE = re.compile(r"(^|/)(valid\w*|eval\w*|\w+_valid\w*|\w+_eval\w*)\.py$", re.I)
CHECKPOINT_FUNCTION = re.compile(r"(save|checkpoint|ckpt)", re.I)
# Activation checkpointing runs inside every forward pass: it is not a checkpoint save.
NOT_A_SAVE_FILE = re.compile(r"torch/utils/checkpoint\.py|_checkpoint/checkpoint_wrapper\.py|activation_checkpoint")
CHECKPOINT_SIGNAL_MIN_WEIGHT = 0.4


def _now() -> float:
    return time.monotonic()


# --------------------------------------------------------------------------------------------
# The stall clock: pure logic over observations, no processes (unit-tested on its own)
# --------------------------------------------------------------------------------------------


@dataclass
class Stall:
    seconds: float  # since the last step (or, before any step, since the last activity)
    threshold: float
    rule: str  # "steps" | "phase-idle" | "phase-limit" | "startup"
    phase: Optional[str] = None


@dataclass
class StallClock:
    floor: float = DEFAULT_FLOOR
    multiple: float = DEFAULT_MULTIPLE
    phase_multiple: float = DEFAULT_PHASE_MULTIPLE
    startup: float = DEFAULT_STARTUP
    started_at: float = field(default_factory=_now)
    intervals: deque = field(default_factory=lambda: deque(maxlen=INTERVAL_HISTORY))
    seeded: bool = False  # intervals carried over from an earlier run of the same job
    last_step: Optional[int] = None
    max_step: Optional[int] = None
    step_changes: int = 0
    last_step_at: Optional[float] = None
    last_progress: float = 0.0
    last_activity: float = 0.0
    phase: Optional[str] = None  # a long phase seen on the stack since the last step
    phase_detail: Optional[str] = None

    def __post_init__(self) -> None:
        self.last_progress = self.last_activity = self.started_at

    @classmethod
    def carried_over(cls, old: StallClock, now: float) -> StallClock:
        """A clock for a restarted run: same settings, the step rhythm already known."""
        clock = cls(old.floor, old.multiple, old.phase_multiple, old.startup, started_at=now)
        clock.intervals.extend(old.intervals)
        clock.seeded = bool(old.intervals)
        return clock

    # -- observations ----------------------------------------------------------------------------

    def step(self, value: int, now: float) -> bool:
        """A step counter seen in new log lines; True when it changed (progress)."""
        if value == self.last_step:
            return False
        if self.last_step_at is not None:
            self.intervals.append(max(0.0, now - self.last_step_at))
        self.last_step, self.last_step_at = value, now
        self.max_step = value if self.max_step is None else max(self.max_step, value)
        self.step_changes += 1
        self.last_progress = self.last_activity = now
        self.phase = self.phase_detail = None
        return True

    def activity(self, now: float) -> None:
        self.last_activity = max(self.last_activity, now)

    def in_phase(self, phase: str, detail: str) -> bool:
        """A long phase seen on the stack; True the first time since the last step."""
        first = self.phase is None
        self.phase, self.phase_detail = phase, detail
        return first

    # -- judgement -------------------------------------------------------------------------------

    @property
    def stepping(self) -> bool:
        """Steps flow: enough of them seen (in this run) to know the job's rhythm."""
        if self.seeded:
            return self.step_changes >= 1
        return len(self.intervals) >= 2

    def interval(self) -> Optional[float]:
        return statistics.median(self.intervals) if self.intervals else None

    def threshold(self) -> float:
        """Seconds without a new step that count as a stall (outside a recognised phase)."""
        if not self.stepping:
            return self.startup
        recent = list(self.intervals)[-RECENT_INTERVALS:]
        return max(self.floor, self.multiple * statistics.median(self.intervals), 2.0 * max(recent))

    def phase_allowance(self) -> float:
        return self.phase_multiple * self.threshold()

    def since_progress(self, now: float) -> float:
        return max(0.0, now - self.last_progress)

    def check(self, now: float) -> Optional[Stall]:
        base = self.threshold()
        if not self.stepping:
            # Start-up (or a job whose log shows no step counter): anything moving is progress.
            quiet = now - max(self.last_progress, self.last_activity)
            return Stall(quiet, base, "startup") if quiet > base else None
        since = self.since_progress(now)
        if self.phase is None:
            return Stall(since, base, "steps") if since > base else None
        allowance = self.phase_allowance()
        if since > allowance:
            return Stall(since, allowance, "phase-limit", self.phase)
        if now - self.last_activity > base:
            return Stall(since, base, "phase-idle", self.phase)
        return None

    def wants_stacks(self, now: float, last_sample: Optional[float]) -> bool:
        """Sample stacks only when nothing else moved for a while: half-way to a stall."""
        base = self.threshold()
        quiet = self.since_progress(now) if self.stepping else now - max(self.last_progress, self.last_activity)
        if quiet < base / 2:
            return False
        every = max(STACK_MIN_EVERY, base / 4)
        return last_sample is None or last_sample < self.last_progress or now - last_sample >= every


# --------------------------------------------------------------------------------------------
# Stacks: which long phase a main thread is in, and the likely cause of a stall
# --------------------------------------------------------------------------------------------


def _checkpoint_signals(knowledge) -> list:
    book = knowledge.playbooks.get("checkpoint-save") if knowledge is not None else None
    if book is None:
        return []
    return [s for s in book.signals if s.source == "stack" and s.weight >= CHECKPOINT_SIGNAL_MIN_WEIGHT]


def phase_of(frames, knowledge=None) -> Optional[Tuple[str, str]]:
    """("checkpoint" | "validation", the frame that says so) for a main thread's frames, or None.

    Checkpoint saves are recognised by the checkpoint-save playbook's stack signals (torch.save,
    safetensors, the usual save functions) and by function names with save/checkpoint/ckpt in them;
    validation by the usual evaluation function names and files.
    """
    signals = _checkpoint_signals(knowledge)
    for frame in frames:
        text = frame.text()
        if NOT_A_SAVE_FILE.search(frame.file or ""):
            continue
        if any(s.pattern.search(text) for s in signals):
            return "checkpoint", text
        if not frame.native and CHECKPOINT_FUNCTION.search(frame.bare_name):
            return "checkpoint", text
    for frame in frames:
        if frame.native:
            continue
        if VALIDATION_FUNCTION.match(frame.bare_name) or VALIDATION_FILE.search(frame.file or ""):
            return "validation", frame.text()
    return None


def quick_cause(knowledge, dumps: Dict[int, object]) -> Optional[str]:
    """The cause whose stack signals the last stack sample matches best (the report says more)."""
    if knowledge is None or not dumps:
        return None
    from assistant.classify import Observations, ObservedLine, match_signals

    obs = Observations()
    for pid, dump in dumps.items():
        for thread in dump.threads:
            for frame in thread.frames:
                obs.add("stack", ObservedLine(frame.text(), pid=pid))
    score: Dict[str, float] = {}
    for match in match_signals(knowledge, obs, sources=("stack",)):
        score[match.signal.cause] = score.get(match.signal.cause, 0.0) + match.signal.weight
    if not score:
        return None
    best = max(score, key=score.get)
    return best if score[best] >= 0.3 else None


def main_thread(dump, pid: int):
    if dump is None or not dump.threads:
        return None
    return next((t for t in dump.threads if t.tid == pid), dump.threads[0])


def describe_stack(thread, depth: int = 3) -> str:
    frames = [f for f in thread.frames if not f.native][:depth] or thread.frames[:depth]
    return " <- ".join(f.text() for f in frames) or "(no frames)"


# --------------------------------------------------------------------------------------------
# The log: followed incrementally, echoed, parsed for step counters
# --------------------------------------------------------------------------------------------


class LogFollower:
    """New complete lines of a growing log file since the last read (tqdm redraws count as lines)."""

    def __init__(self, path: str, echo: Optional[Callable[[bytes], None]] = None, from_end: bool = False):
        self.path = path
        self.echo = echo
        self.offset = 0
        self.partial = b""
        self.error: Optional[str] = None
        if from_end:
            try:
                self.offset = call_with_timeout(lambda: os.stat(path).st_size, FILE_SECONDS, f"stat {path}")
            except (OSError, CallTimedOut):
                self.offset = 0

    def _read_new(self) -> bytes:
        size = os.stat(self.path).st_size
        if size < self.offset:  # truncated or rotated: start over
            self.offset, self.partial = 0, b""
        if size == self.offset:
            return b""
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(MAX_READ_PER_TICK)
        self.offset += len(data)
        return data

    def read(self, final: bool = False) -> Tuple[List[str], bool]:
        """(new lines, whether the file grew). Never raises; a read problem lands in .error."""
        try:
            data = call_with_timeout(self._read_new, FILE_SECONDS, f"reading {self.path}")
        except FileNotFoundError:
            return [], False
        except (OSError, CallTimedOut) as exc:
            self.error = f"log {self.path}: {exc}"
            return [], False
        if not data:
            if final and self.partial:
                text, self.partial = self.partial, b""
                return _lines(text), False
            return [], False
        if self.echo is not None:
            self.echo(data)
        data = self.partial + data
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if final:
            complete, self.partial = data, b""
        else:
            complete, self.partial = data[: cut + 1], data[cut + 1 :]
            if len(self.partial) > MAX_PARTIAL_LINE:  # a line that never ends is taken in pieces
                complete, self.partial = data, b""
        return _lines(complete), True


def _lines(raw: bytes) -> List[str]:
    text = raw.decode("utf-8", errors="replace")
    out = []
    for segment in re.split(r"[\r\n]", text):
        segment = _ANSI.sub("", segment).strip()
        if segment:
            out.append(segment)
    return out


# --------------------------------------------------------------------------------------------
# The process tree: CPU and I/O counters, cheap enough for every poll
# --------------------------------------------------------------------------------------------


@dataclass
class TreeSample:
    alive: bool
    processes: int = 0
    cpu_percent: Optional[float] = None  # % of one core, the whole tree
    io_bytes_per_second: Optional[float] = None
    states: Dict[int, str] = field(default_factory=dict)


class ProcessTree:
    def __init__(self, root: int):
        self.root = root
        self.procs: Dict[int, psutil.Process] = {}
        self.python: Dict[int, bool] = {}
        self.listed_at: Optional[float] = None
        self.counters: Dict[int, Tuple[float, Optional[int]]] = {}
        self.sampled_at: Optional[float] = None

    def _list(self) -> None:
        top = psutil.Process(self.root)
        found = {top.pid: top}
        for child in top.children(recursive=True):
            found[child.pid] = child
        for pid, proc in found.items():
            if pid not in self.python:
                try:
                    head = " ".join(proc.cmdline()[:1]) + " " + proc.name()
                except psutil.Error:
                    head = ""
                self.python[pid] = "python" in head.lower()
        self.procs = found

    def _counters(self) -> Dict[int, Tuple[float, Optional[int], str]]:
        out = {}
        for pid, proc in list(self.procs.items()):
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    status = proc.status()
                    try:
                        io = proc.io_counters()
                        moved = getattr(io, "read_chars", io.read_bytes) + getattr(io, "write_chars", io.write_bytes)
                    except (psutil.AccessDenied, AttributeError):
                        moved = None
            except psutil.Error:
                continue
            out[pid] = (times.user + times.system, moved, status)
        return out

    def sample(self, now: float) -> TreeSample:
        """Never raises: a tree that cannot be read is reported as such (alive stays True)."""
        try:
            if not psutil.pid_exists(self.root):
                return TreeSample(alive=False)
            if self.listed_at is None or now - self.listed_at >= TREE_REFRESH_SECONDS:
                call_with_timeout(self._list, FILE_SECONDS, f"listing the processes of {self.root}")
                self.listed_at = now
            counters = call_with_timeout(self._counters, FILE_SECONDS, f"reading counters of {self.root}")
        except psutil.NoSuchProcess:
            return TreeSample(alive=False)
        except (psutil.Error, OSError, CallTimedOut):
            return TreeSample(alive=True)
        sample = TreeSample(alive=True, processes=len(counters))
        sample.states = {pid: c[2] for pid, c in counters.items()}
        if self.sampled_at is not None and now > self.sampled_at:
            elapsed = now - self.sampled_at
            cpu = io = 0.0
            known_io = False
            for pid, (cpu_s, moved, _) in counters.items():
                before = self.counters.get(pid)
                if before is None:
                    continue
                cpu += max(0.0, cpu_s - before[0])
                if moved is not None and before[1] is not None:
                    io += max(0, moved - before[1])
                    known_io = True
            sample.cpu_percent = round(100.0 * cpu / elapsed, 1)
            sample.io_bytes_per_second = round(io / elapsed) if known_io else None
        self.counters = {pid: (c[0], c[1]) for pid, c in counters.items()}
        self.sampled_at = now
        if self.root in sample.states and sample.states[self.root] == psutil.STATUS_ZOMBIE:
            sample.alive = False
        return sample

    def python_pids(self) -> List[int]:
        pids = [pid for pid in self.procs if self.python.get(pid)]
        pids.sort(key=lambda p: (p != self.root, p))
        return pids[:MAX_STACK_PROCESSES]

    def remembered(self) -> List[int]:
        return list(self.procs)


# --------------------------------------------------------------------------------------------
# The job: launched by us (its own session, output to a log we own) or attached to
# --------------------------------------------------------------------------------------------


@dataclass
class Job:
    pid: int
    command: List[str]
    cwd: str
    env: Optional[Dict[str, str]] = None  # the full environment to relaunch with
    proc: Optional[subprocess.Popen] = None  # None when attached
    log: Optional[str] = None  # the log we own (launched jobs)
    logs: List[str] = field(default_factory=list)  # every log followed for progress
    run: int = 1

    @property
    def launched(self) -> bool:
        return self.proc is not None

    def exit_code(self) -> Optional[int]:
        """The exit status once it ended by itself (None while it runs; attached: None when unknown)."""
        if self.proc is None:
            return None
        code = self.proc.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code

    def gone(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is not None
        try:
            return psutil.Process(self.pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True
        except psutil.Error:
            return False


def launch(command: List[str], cwd: str, log_path: Path, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    """Start the command in a session of its own, stdout and stderr appended to log_path."""
    full_env = dict(os.environ if env is None else env)
    # The job writes to a file now, not a terminal: without this Python buffers its prints in 8 KiB
    # blocks and the step counter would reach the log minutes late.
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        try:
            return subprocess.Popen(
                command,
                cwd=cwd,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise BadInput(f"command not found: {command[0]}", "give the program to run after --") from None
        except PermissionError:
            raise BadInput(f"cannot run {command[0]}: permission denied", "is it executable?") from None


def attach(pid: int) -> Job:
    """A Job for a running process: its command, directory, environment and log files."""
    try:
        proc = psutil.Process(pid)

        def read():
            with proc.oneshot():
                return proc.cmdline(), proc.cwd(), proc.environ(), proc.status()

        cmdline, cwd, env, status = call_with_timeout(read, FILE_SECONDS, f"reading process {pid}")
    except psutil.NoSuchProcess:
        raise NotInspectable(f"process {pid} does not exist (it may have exited)", "check the PID with ps") from None
    except psutil.AccessDenied:
        raise NotInspectable(
            f"permission denied reading process {pid}", "run debug-stuck as the job's user or as root"
        ) from None
    except CallTimedOut as exc:
        raise NotInspectable(f"{exc}", "the process may be in uninterruptible sleep; try diagnose") from None
    if status == psutil.STATUS_ZOMBIE:
        raise NotInspectable(f"process {pid} has exited (zombie)", "nothing left to watch")
    logs = []
    for fd in (1, 2):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/") and not target.startswith("/dev/") and os.path.isfile(target):
            logs.append(target)
    return Job(pid=pid, command=cmdline, cwd=cwd, env=env, logs=list(dict.fromkeys(logs)))


def redact_command(argv: List[str]) -> List[str]:
    """The command with secrets blanked: token-like values, and the values of options named like
    secrets (``--hf_token X``, ``--api-key=X``). For events and the journal; the job runs unredacted."""
    from probes.procs import REDACTED, SECRET_NAME, SECRET_VALUE

    out: List[str] = []
    hide_next = False
    for arg in argv:
        arg = str(arg)
        if hide_next and not arg.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if arg.startswith("-") and "=" in arg:
            name, value = arg.split("=", 1)
            if SECRET_NAME.search(name.replace("-", "_")) or SECRET_VALUE.match(value):
                arg = f"{name}={REDACTED}"
        elif arg.startswith("-"):
            hide_next = bool(SECRET_NAME.search(arg.replace("-", "_")))
        elif SECRET_VALUE.match(arg):
            arg = REDACTED
        out.append(arg)
    return out


def _recovery():
    """assistant.recovery (resume plans, safe stop), or None where it is not installed."""
    try:
        from assistant import recovery
    except ImportError:
        return None
    return recovery


# --------------------------------------------------------------------------------------------
# The watcher
# --------------------------------------------------------------------------------------------


@dataclass
class WatchSettings:
    on_hang: str = "report"
    max_restarts: int = DEFAULT_MAX_RESTARTS
    report_dir: Path = Path(DEFAULT_REPORT_DIR)
    poll: float = DEFAULT_POLL
    floor: float = DEFAULT_FLOOR
    multiple: float = DEFAULT_MULTIPLE
    phase_multiple: float = DEFAULT_PHASE_MULTIPLE
    startup: float = DEFAULT_STARTUP
    progress_every: float = DEFAULT_PROGRESS_EVERY
    grace: float = DEFAULT_GRACE
    native: bool = True
    logs: List[str] = field(default_factory=list)  # extra logs to follow
    echo: Optional[Callable[[bytes], None]] = None  # where the job's output is teed (None: quiet)
    journal: bool = True
    gpu: bool = True

    def validate(self) -> None:
        if self.on_hang not in ON_HANG:
            raise BadInput(f"--on-hang {self.on_hang!r} is not valid", f"valid: {', '.join(ON_HANG)}")
        checks = (
            ("--poll", self.poll, 0.1, 60.0),
            ("--floor", self.floor, 1.0, 86400.0),
            ("--multiple", self.multiple, 1.0, 1000.0),
            ("--phase-multiple", self.phase_multiple, 1.0, 1000.0),
            ("--startup", self.startup, 1.0, 86400.0),
            ("--grace", self.grace, 0.0, 3600.0),
        )
        for flag, value, low, high in checks:
            if not low <= value <= high:
                raise BadInput(f"{flag} {value:g} is out of range", f"give a number from {low:g} to {high:g}")
        if self.max_restarts < 0:
            raise BadInput(f"--max-restarts {self.max_restarts} is negative", "give 0 or more")
        if self.progress_every < 0:
            raise BadInput(f"--progress-every {self.progress_every:g} is negative", "give seconds, or 0 for none")


class _Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Watcher:
    def __init__(self, settings: WatchSettings, emit: Callable[[dict], None]):
        settings.validate()
        self.settings = settings
        self._emit = emit
        self.watch_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.host = socket.gethostname()
        self.job: Optional[Job] = None
        self.original_command: Optional[List[str]] = None  # the job's identity in the journal, across restarts
        self.knowledge = None
        self.restarts = 0
        self.previous_incident_step: Optional[int] = None
        self.incident_steps: List[Optional[int]] = []  # the last step of each stall so far
        self.incidents = 0
        self.clock = StallClock(settings.floor, settings.multiple, settings.phase_multiple, settings.startup)
        self.followers: List[LogFollower] = []
        self.tree: Optional[ProcessTree] = None
        self.dumps: Dict[int, object] = {}
        self.stack_sampled_at: Optional[float] = None
        self.last_sample: Optional[TreeSample] = None
        self.gpu_available: Optional[bool] = None if settings.gpu else False
        self.gpu_checked_at: Optional[float] = None
        self.last_gpu: Optional[dict] = None
        self.stalled: Optional[Stall] = None  # the stall reported and not yet over (--on-hang report)
        self.stalled_incident: Optional[int] = None  # its journal id
        self.progress_emitted_at: Optional[float] = None

    # -- events -----------------------------------------------------------------------------------

    def emit(self, event: str, **data) -> None:
        record = {"event": event, "time": round(time.time(), 3), "watch_id": self.watch_id}
        record.update(data)
        self._emit(record)

    # -- entry points -----------------------------------------------------------------------------

    def watch_command(self, command: List[str], cwd: Optional[str] = None) -> int:
        if not command:
            raise BadInput("no command to watch", "give it after --, e.g. debug-stuck watch -- python train.py")
        cwd = cwd or os.getcwd()
        self._start(Job(pid=0, command=list(command), cwd=cwd))
        return self._loop()

    def watch_pid(self, pid: int) -> int:
        job = attach(pid)
        if self.settings.on_hang != "report" and _recovery() is None:
            raise BadInput(
                f"--on-hang {self.settings.on_hang} on an attached job needs assistant.recovery (safe stop)",
                "use --on-hang report, or launch the job with debug-stuck watch -- CMD",
            )
        self._start(job)
        return self._loop()

    # -- start, follow, judge ---------------------------------------------------------------------

    def _log_path(self, run: int) -> Path:
        return self.settings.report_dir / f"watch-{self.watch_id}-run{run}.log"

    def _start(self, job: Job, restarted_from: Optional[int] = None) -> None:
        if self.knowledge is None:  # before anything is launched: a broken knowledge base stops us here
            from assistant.kb import load_knowledge

            self.knowledge = load_knowledge()
        if job.pid == 0 or restarted_from is not None:
            job.log = str(self._log_path(job.run))
            try:
                job.proc = launch(job.command, job.cwd, Path(job.log), job.env)
            except OSError as exc:
                raise BadInput(
                    f"cannot write the job's log {job.log}: {exc.strerror or exc}", "give a writable --report-dir"
                ) from None
            job.pid = job.proc.pid
            job.logs = [job.log]
        self.job = job
        if self.original_command is None:
            self.original_command = list(job.command)
        logs = list(dict.fromkeys(job.logs + list(self.settings.logs)))
        self.followers = [
            # The log we own is read from its start; any other only from now on (its past is not this run).
            LogFollower(path, self.settings.echo if path == job.log else None, from_end=path != job.log)
            for path in logs
        ]
        self.tree = ProcessTree(job.pid)
        self.dumps, self.stack_sampled_at, self.stalled, self.last_sample = {}, None, None, None
        now = _now()
        self.progress_emitted_at = now
        if restarted_from is not None:
            self.clock = StallClock.carried_over(self.clock, now)
        if not job.launched:
            self._seed_from_existing_logs(now)
        if restarted_from is None:
            self.emit(
                "started",
                pid=job.pid,
                command=redact_command(job.command),
                cwd=job.cwd,
                log=job.log,
                logs=logs,
                attached=not job.launched,
                host=self.host,
                on_hang=self.settings.on_hang,
                threshold=self.clock.threshold(),
                floor=self.settings.floor,
            )

    def _seed_from_existing_logs(self, now: float) -> None:
        """Attached: the last step already in the logs, and when the logs last changed."""
        from probes.logtail import read_log_tail

        newest = None
        for follower in self.followers:
            tail = read_log_tail(follower.path)
            if tail.error:
                continue
            if tail.progress.last_step is not None:
                self.clock.last_step = self.clock.max_step = tail.progress.last_step
            if tail.mtime is not None:
                newest = tail.mtime if newest is None else max(newest, tail.mtime)
        if newest is not None:
            age = max(0.0, time.time() - newest)
            self.clock.last_progress = self.clock.last_activity = now - age

    def _follow_logs(self, now: float, final: bool = False) -> bool:
        stepped = False
        for follower in self.followers:
            lines, grew = follower.read(final=final)
            if grew:
                self.clock.activity(now)
            if lines:
                from probes.logtail import parse_progress

                progress = parse_progress(lines)
                if progress.last_step is not None and self.clock.step(progress.last_step, now):
                    stepped = True
        return stepped

    def _sample_tree(self, now: float) -> Optional[TreeSample]:
        sample = self.tree.sample(now) if self.tree is not None else None
        if sample is None or not sample.alive:
            return sample
        self.last_sample = sample
        if sample.cpu_percent is not None and sample.cpu_percent >= CPU_ACTIVE_PERCENT:
            self.clock.activity(now)
        if sample.io_bytes_per_second is not None and sample.io_bytes_per_second >= IO_ACTIVE_BYTES_PER_SECOND:
            self.clock.activity(now)
        return sample

    def _sample_gpu(self, now: float) -> None:
        if self.gpu_available is False:
            return
        if self.gpu_checked_at is not None and now - self.gpu_checked_at < GPU_EVERY_SECONDS:
            return
        self.gpu_checked_at = now
        from probes.gpu import collect_gpus

        snap = collect_gpus(timeout=3.0, samples=1)
        if not snap.available or not snap.devices:
            self.gpu_available = False
            return
        self.gpu_available = True
        pids = set(self.tree.remembered()) if self.tree is not None else set()
        used = {p.gpu_index for p in snap.processes if p.pid in pids}
        devices = [d for d in snap.devices if not used or d.index in used]
        utils = [d.util for d in devices if d.util is not None]
        power = [d.power_ratio() for d in devices if d.power_ratio() is not None]
        self.last_gpu = {
            "util": max(utils) if utils else None,
            "power_ratio": round(max(power), 3) if power else None,
            "devices": [d.index for d in devices],
        }
        if utils and max(utils) >= GPU_ACTIVE_UTIL:
            self.clock.activity(now)

    def _sample_stacks(self, now: float) -> None:
        from probes.stacks import sample_stacks

        pids = self.tree.python_pids() if self.tree is not None else []
        if not pids:
            self.stack_sampled_at = now
            return
        series = sample_stacks(pids, samples=1, native=False, timeout=STACK_TIMEOUT)
        self.stack_sampled_at = _now()
        moved = False
        fresh = {}
        for pid, entry in series.items():
            dump = entry.latest()
            if dump is None:
                continue
            fresh[pid] = dump
            before = main_thread(self.dumps.get(pid), pid)
            after = main_thread(dump, pid)
            if before is not None and after is not None and before.signature(lines=True) != after.signature(lines=True):
                moved = True
        if moved:
            self.clock.activity(self.stack_sampled_at)
        self.dumps = fresh
        for pid, dump in fresh.items():
            thread = main_thread(dump, pid)
            if thread is None:
                continue
            found = phase_of(thread.frames, self.knowledge)
            if found is not None:
                phase, frame = found
                if self.clock.in_phase(phase, frame):
                    self.emit(
                        "phase",
                        phase=phase,
                        frame=frame,
                        pid=pid,
                        seconds=round(self.clock.since_progress(now), 1),
                        allowance=round(self.clock.phase_allowance(), 1),
                    )
                break

    def _maybe_progress_event(self, now: float) -> None:
        every = self.settings.progress_every
        if not every:
            return
        if self.progress_emitted_at is not None and now - self.progress_emitted_at < every:
            return
        self.progress_emitted_at = now
        interval = self.clock.interval()
        sample = self.last_sample
        self.emit(
            "progress",
            pid=self.job.pid,
            step=self.clock.last_step,
            seconds_since_step=round(self.clock.since_progress(now), 1) if self.clock.last_step is not None else None,
            interval=round(interval, 3) if interval is not None else None,
            threshold=round(self.clock.threshold(), 1),
            stepping=self.clock.stepping,
            cpu_percent=sample.cpu_percent if sample else None,
            processes=sample.processes if sample else None,
        )

    def _loop(self) -> int:
        previous = {}
        for signum in (signal.SIGTERM, signal.SIGHUP):
            try:
                previous[signum] = signal.signal(signum, self._on_signal)
            except (ValueError, OSError):  # not the main thread: leave signals to the caller
                pass
        try:
            return self._watch()
        except (KeyboardInterrupt, _Interrupted) as exc:
            signum = exc.signum if isinstance(exc, _Interrupted) else signal.SIGINT
            return self._interrupted(signum)
        finally:
            for signum, handler in previous.items():
                try:
                    signal.signal(signum, handler)
                except (ValueError, OSError):
                    pass

    def _on_signal(self, signum, frame) -> None:
        raise _Interrupted(signum)

    def _watch(self) -> int:
        next_poll = _now()
        while True:
            now = _now()
            self._follow_logs(now)
            if self.job.gone():
                return self._exited()
            if now >= next_poll:
                next_poll = now + self.settings.poll
                sample = self._sample_tree(now)
                if sample is not None and not sample.alive:
                    return self._exited()
                self._sample_gpu(now)
                if self.clock.wants_stacks(now, self.stack_sampled_at):
                    self._sample_stacks(now)
                code = self._judge(_now())
                if code is not None:
                    return code
                self._maybe_progress_event(now)
            time.sleep(max(0.0, min(TICK, next_poll - _now())))

    def _judge(self, now: float) -> Optional[int]:
        stall = self.clock.check(now)
        if self.stalled is not None:
            if stall is None:  # it moved again after a reported stall
                self.emit("resumed", pid=self.job.pid, step=self.clock.last_step)
                self._journal_update(
                    self.stalled_incident, outcome=f"moved again by itself (step {self.clock.last_step})"
                )
                self.stalled = self.stalled_incident = None
            return None
        if stall is None:
            return None
        # Before calling it a stall, look at the stacks once more: a long phase gets its allowance.
        if self.stack_sampled_at is None or now - self.stack_sampled_at > STACK_MIN_EVERY:
            self._sample_stacks(now)
            now = _now()
            stall = self.clock.check(now)
            if stall is None:
                return None
        return self._on_stall(stall, now)

    # -- a stall ----------------------------------------------------------------------------------

    def _stall_evidence(self) -> dict:
        out: dict = {}
        sample = self.last_sample
        if sample is not None:
            out["cpu_percent"] = sample.cpu_percent
            out["io_bytes_per_second"] = sample.io_bytes_per_second
            out["processes"] = sample.processes
            odd = {str(pid): s for pid, s in sample.states.items() if s in ("disk-sleep", "stopped", "zombie")}
            if odd:
                out["states"] = odd
        if self.last_gpu is not None:
            out["gpu"] = self.last_gpu
        thread = main_thread(self.dumps.get(self.job.pid), self.job.pid) if self.dumps else None
        if thread is None and self.dumps:
            pid, dump = next(iter(self.dumps.items()))
            thread = main_thread(dump, pid)
        if thread is not None:
            out["stack"] = describe_stack(thread)
        return out

    def _on_stall(self, stall: Stall, now: float) -> Optional[int]:
        self.incidents += 1
        job = self.job
        last_step = self.clock.last_step
        cause_hint = quick_cause(self.knowledge, self.dumps)
        self.emit(
            "stall",
            pid=job.pid,
            seconds=round(stall.seconds, 1),
            threshold=round(stall.threshold, 1),
            rule=stall.rule,
            phase=stall.phase,
            last_step=last_step,
            interval=round(self.clock.interval(), 3) if self.clock.interval() is not None else None,
            cause=cause_hint,
            evidence=self._stall_evidence(),
        )
        report = self._write_report(stall, last_step)
        self.incident_steps.append(last_step)
        incident_id = self._journal_record(stall, last_step, report, cause_hint)
        if job.gone():  # it ended while we were looking at it: nothing to act on
            self._journal_update(incident_id, outcome="the job ended by itself")
            return self._exited()
        if self._follow_logs(_now()):  # it moved while we were writing the report
            self.emit("resumed", pid=job.pid, step=self.clock.last_step, note="progress resumed during the report")
            self._journal_update(incident_id, outcome="resumed")
            return None
        if self.settings.on_hang == "report":
            self.stalled, self.stalled_incident = stall, incident_id
            self._journal_update(incident_id, action="report")
            return None
        if self.settings.on_hang == "stop":
            self._stop(reason="--on-hang stop")
            self._journal_update(incident_id, action="stop", outcome="stopped")
            return EXIT_STALLED
        return self._restart(stall, last_step, incident_id)

    def _diagnose(self, stall: Stall, last_step: Optional[int]):
        from assistant.diagnose import DiagnoseRequest, run_diagnosis

        request = DiagnoseRequest(
            answers=self._answers(last_step),
            pids=[self.job.pid],
            logs=list(dict.fromkeys(self.job.logs + list(self.settings.logs))),
            native=self.settings.native,
        )
        report = run_diagnosis(request, self.knowledge)
        what = f"step {last_step}" if last_step is not None else "any progress"
        report.notes.insert(
            0,
            f"debug-stuck watch: no {'new step' if last_step is not None else 'progress'} for "
            f"{stall.seconds:.0f} s (threshold {stall.threshold:.0f} s, rule {stall.rule}); last seen: {what}",
        )
        if report.resume is None:
            plan = self._resume_plan()
            if plan is not None:
                report.resume = plan.to_dict()
        return report

    def _answers(self, last_step: Optional[int]) -> dict:
        """Triage answers the watcher knows: mid-run (steps were seen), and whether this job stalled at
        this same step before (this session, or earlier ones in the journal): pattern D, deterministic."""
        from assistant.answers import Answer

        answers = {}
        if last_step is None:
            return answers
        answers["phase"] = Answer("phase", "mid-run", "evidence")
        earlier = list(self.incident_steps)
        if self.settings.journal:
            from assistant.journal import Journal, JournalError

            command = shlex.join(redact_command(self.original_command or self.job.command))
            try:
                since = time.time() - JOURNAL_LOOKBACK_SECONDS
                earlier += [
                    i.last_step for i in Journal().incidents(limit=200) if i.command == command and i.time >= since
                ]
            except JournalError:
                pass
        earlier = [s for s in earlier if s is not None]
        if earlier:
            answers["step"] = Answer("step", "same-step" if last_step in earlier else "random", "evidence")
        return answers

    def _write_report(self, stall: Stall, last_step: Optional[int]) -> dict:
        job = self.job
        out: dict = {"pid": job.pid}
        try:
            report = call_with_timeout(lambda: self._diagnose(stall, last_step), DIAGNOSIS_SECONDS, "the diagnosis")
        except Exception as exc:  # the job may have exited, or a collector failed: say so, keep watching
            message = exc.one_line() if hasattr(exc, "one_line") else f"{type(exc).__name__}: {exc}"
            out["error"] = f"could not diagnose: {message}"
            self.emit("report", **out)
            return out
        import json

        from assistant.render_markdown import render_markdown

        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = self.settings.report_dir / f"incident-{stamp}-pid{job.pid}"
        paths = {"markdown": str(base) + ".md", "json": str(base) + ".json"}
        try:
            self.settings.report_dir.mkdir(parents=True, exist_ok=True)
            _write_atomic(Path(paths["markdown"]), render_markdown(report))
            _write_atomic(Path(paths["json"]), json.dumps(report.to_dict(), indent=2) + "\n")
            out["paths"] = paths
        except OSError as exc:
            out["error"] = f"could not write the report into {self.settings.report_dir}: {exc.strerror or exc}"
        verdict = report.verdict
        out.update(
            cause=verdict.cause,
            confidence=verdict.confidence,
            pattern=report.pattern,
            phase=verdict.phase,
            hung=verdict.hung,
            summary=verdict.summary,
        )
        self.emit("report", **out)
        return out

    def _journal_record(self, stall: Stall, last_step, report: dict, cause_hint) -> Optional[int]:
        if not self.settings.journal:
            return None
        from assistant.journal import Incident, Journal, JournalError

        paths = report.get("paths") or {}
        incident = Incident(
            time=time.time(),
            command=shlex.join(redact_command(self.original_command or self.job.command)),
            pid=self.job.pid,
            host=self.host,
            cwd=self.job.cwd,
            last_step=last_step,
            seconds_stalled=round(stall.seconds, 1),
            threshold=round(stall.threshold, 1),
            cause=report.get("cause") or cause_hint,
            confidence=report.get("confidence"),
            pattern=report.get("pattern"),
            phase=report.get("phase") or stall.phase,
            summary=report.get("summary") or report.get("error"),
            report_markdown=paths.get("markdown"),
            report_json=paths.get("json"),
            watch_id=self.watch_id,
            attempt=self.restarts + 1,
        )
        try:
            return Journal().record(incident)
        except JournalError as exc:
            self.emit("warning", message=str(exc))
            return None

    def _journal_update(self, incident_id: Optional[int], **fields) -> None:
        if incident_id is None:
            return
        from assistant.journal import Journal, JournalError

        try:
            Journal().update(incident_id, **fields)
        except JournalError as exc:
            self.emit("warning", message=str(exc))

    # -- stop and restart -------------------------------------------------------------------------

    def _resume_plan(self):
        recovery = _recovery()
        if recovery is None:
            return None
        job = self.job
        try:
            return call_with_timeout(
                lambda: recovery.plan_resume(job.command, job.cwd, env=job.env), RESUME_PLAN_SECONDS, "resume plan"
            )
        except Exception as exc:  # no plan is a fallback, not a failure of the watch
            message = exc.one_line() if hasattr(exc, "one_line") else f"{type(exc).__name__}: {exc}"
            self.emit("warning", message=f"could not plan the resume: {message}")
            return None

    def _stop(self, reason: str, action: str = "stop") -> dict:
        """End the job's whole tree (assistant.recovery.stop_job; for a job we launched, its own session
        as the fallback), then tell what happened in an `action` event. Returns that event's data."""
        job = self.job
        started = _now()
        recovery = _recovery()
        result: dict = {"action": action, "pid": job.pid, "reason": reason}
        if recovery is not None:
            box: dict = {}

            def run():
                try:
                    box["result"] = recovery.stop_job(
                        job.pid, report_dir=str(self.settings.report_dir), grace=self.settings.grace, write_report=False
                    )
                except Exception as exc:  # reported below; the fallback still ends our own session
                    box["error"] = exc

            worker = threading.Thread(target=run, name="watch:stop", daemon=True)
            worker.start()
            deadline = _now() + 3 * self.settings.grace + 30.0
            while worker.is_alive() and _now() < deadline:
                if job.proc is not None:
                    job.proc.poll()  # reap our child as soon as it dies, so the stopper sees it gone
                worker.join(0.1)
            stopped = box.get("result")
            result["via"] = "stop_job"
            if stopped is not None:
                result.update(
                    stopped=list(stopped.stopped), signals=list(stopped.signals), left=list(stopped.left or [])
                )
            else:
                error = box.get("error")
                message = error.one_line() if hasattr(error, "one_line") else str(error or "did not return in time")
                result["error"] = f"stop_job: {message}"
        if job.launched and (recovery is None or result.get("error") or result.get("left")):
            result["via"] = "stop_job+session" if recovery is not None else "session"
            result["left"] = self._stop_own_session()
        if job.proc is not None:
            try:
                job.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        result["seconds"] = round(_now() - started, 1)
        self.emit("action", **result)
        return result

    def _stop_own_session(self) -> List[int]:
        """End the session we launched the job in: SIGINT, SIGTERM, then SIGKILL (every process in it is the job's)."""
        job = self.job
        pgid = job.proc.pid
        steps = ((signal.SIGINT, self.settings.grace / 2), (signal.SIGTERM, self.settings.grace / 2))
        for sig, wait in steps:
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                return []
            deadline = _now() + wait
            while _now() < deadline:
                if job.proc.poll() is not None and not _group_alive(pgid):
                    return []
                time.sleep(0.1)
        from probes.bounded import kill_process_group

        kill_process_group(pgid)
        try:
            job.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return [pgid]
        return []

    def _restart(self, stall: Stall, last_step: Optional[int], incident_id: Optional[int]) -> Optional[int]:
        job = self.job
        reason = None
        if self.restarts >= self.settings.max_restarts:
            reason = f"reached --max-restarts {self.settings.max_restarts}"
        elif self.restarts > 0:
            best = self.clock.max_step
            previous = self.previous_incident_step
            if previous is None and best is None:
                reason = "no progress since the last restart: the job shows no step counter that moved"
            elif previous is not None and (best is None or best <= previous):
                where = f"step {last_step}" if last_step is not None else "before its first step"
                reason = (
                    f"no progress since the last restart: it stalled again at {where} without getting past step "
                    f"{previous} (a deterministic hang: restarting will not help, read the report)"
                )
        if reason is not None:
            self._stop(reason="giving up on restarts")
            self.emit("gave-up", pid=job.pid, reason=reason, restarts=self.restarts, last_step=last_step)
            self._journal_update(incident_id, action="gave-up", outcome=reason)
            return EXIT_STALLED
        self.previous_incident_step = last_step
        stopped = self._stop(reason="--on-hang restart", action="restart")
        if stopped.get("left"):
            reason = f"processes still alive after the stop: {stopped['left']}; not starting a second copy"
            self.emit("gave-up", pid=job.pid, reason=reason, restarts=self.restarts, last_step=last_step)
            self._journal_update(incident_id, action="gave-up", outcome=reason)
            return EXIT_STALLED
        self._follow_logs(_now(), final=True)  # the old run's last words (a traceback from the stop)
        plan = self._resume_plan()
        command, env, resume = list(job.command), job.env, {}
        if plan is None:
            resume["note"] = "no resume plan (assistant.recovery unavailable): restarting the original command"
        else:
            if getattr(plan, "argv", None):
                command = [str(a) for a in plan.argv]
            elif plan.command:
                command = shlex.split(plan.command)
            if getattr(plan, "env", None):
                env = dict(os.environ if env is None else env)
                env.update(plan.env)
            checkpoint = plan.checkpoint
            resume = {
                "checkpoint": getattr(checkpoint, "path", checkpoint) if checkpoint is not None else None,
                "checkpoint_step": getattr(checkpoint, "step", None),
                "framework": getattr(plan, "framework", None),
                "lost": getattr(plan, "lost", None),
                "notes": list(getattr(plan, "notes", []) or []),
            }
        self.restarts += 1
        new = Job(pid=0, command=command, cwd=getattr(plan, "cwd", None) or job.cwd, env=env, run=job.run + 1)
        try:
            self._start(new, restarted_from=job.pid)
        except BadInput as exc:
            self.emit("gave-up", pid=job.pid, reason=f"could not relaunch: {exc.one_line()}", restarts=self.restarts)
            self._journal_update(incident_id, action="gave-up", outcome="relaunch failed")
            return EXIT_STALLED
        self._journal_update(incident_id, action="restart", outcome=f"restarted as pid {new.pid}")
        self.emit(
            "restarted",
            pid=new.pid,
            previous_pid=job.pid,
            attempt=self.restarts,
            max_restarts=self.settings.max_restarts,
            command=redact_command(command),
            log=new.log,
            **resume,
        )
        return None

    # -- the end ----------------------------------------------------------------------------------

    def _exited(self) -> int:
        self._follow_logs(_now(), final=True)
        code = self.job.exit_code()
        self.emit("exited", pid=self.job.pid, code=code, last_step=self.clock.last_step, restarts=self.restarts)
        if self.job.proc is None:
            return 0
        return code if code is not None else 0

    def _interrupted(self, signum: int) -> int:
        """Ctrl-C or SIGTERM to the watcher: pass it on to a job we launched (its own session does not
        get the terminal's signals), wait for it, then leave. An attached job is left alone."""
        job = self.job
        name = signal.Signals(signum).name
        if job is not None and job.launched and job.proc.poll() is None:
            self.emit(
                "action", action="stop", pid=job.pid, reason=f"watch got {name}: passing it on to the job", via="signal"
            )
            try:
                os.killpg(job.proc.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                job.proc.wait(timeout=self.settings.grace)
            except subprocess.TimeoutExpired:
                self._stop_own_session()
            code = job.exit_code()
            self.emit("exited", pid=job.pid, code=code, last_step=self.clock.last_step, restarts=self.restarts)
        return 128 + signum


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Signal 0 also reaches zombies: only count members that still run.
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (OSError, psutil.Error):
            continue
    return False


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")

    def write():
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)

    try:
        call_with_timeout(write, FILE_SECONDS * 2, f"writing {path}")
    except CallTimedOut as exc:
        raise OSError(str(exc)) from None
