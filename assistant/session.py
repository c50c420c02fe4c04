"""The interactive session's core: what the Textual app and the questionary prompts both walk.

1. pick the job (the training jobs running here, a PID, or "not running, describe it");
2. triage: the tree's questions, each pre-filled from live evidence with the reason in one sentence;
3. the live evidence itself (the preliminary report, and a history of GPU readings);
4. probes, run in a child process so that a cancel really stops them;
5. the diagnosis, by `assistant.diagnose.run_diagnosis`, the same as `debug-stuck diagnose`;
6. the report saved as Markdown and JSON, the fix commands copied, and the recovery actions
   once `assistant.recovery` exists.

No UI is imported here. Front ends call the slow methods (`discover`, `collect_evidence`,
`sample_gpus`, `run_probe`, `diagnose`) from worker threads and render what they return.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Deque, Dict, List, Optional, Sequence, Tuple

from assistant.answers import Answer, check_answer
from assistant.contract import UNKNOWN
from assistant.errors import BadInput, NotInspectable
from assistant.kb import Knowledge, load_knowledge
from assistant.report import Report
from assistant.tree import Question, Tree, Walk

Say = Callable[[str], None]

# The contract's three triage questions are asked even when the walked path does not need them:
# the classifier matches answer signals (e.g. "gpu=busy") whatever the path.
TRIAGE_KEYS = ("phase", "step", "gpu")
GPU_IDLE_UTIL = 5.0  # the same threshold as assistant.observe: below it a GPU counts as idle
GPU_HISTORY_READINGS = 120
LOW_POWER_RATIO = 1 / 3  # the tree's `power` question: "under about a third of the limit" is low
LOG_PEEK_BYTES = 16 * 1024
LOG_PEEK_SECONDS = 2.0
GPU_READ_SECONDS = 3.0
# A probe runs in `debug-stuck probe` as a child process; it gets its own limit, the core's
# clean-up grace, and this much for the interpreter to start, before it is killed.
PROBE_START_SECONDS = 15.0
PROBE_POLL_SECONDS = 0.1
CLIPBOARD_SECONDS = 2.0
REPORT_PREFIX = "debug-stuck-report-"

# What each probe needs from the user besides the job's PIDs: (kind, prompt).
PROBE_INPUTS: Dict[str, Tuple[str, str]] = {
    "nccl-debug-run": ("command", "your launch command, e.g. torchrun --nproc_per_node 2 train.py"),
    "dataloader": ("factory", "MODULE:FUNC that returns your Dataset or DataLoader"),
    "gc": ("script", "the training script to run under GC timing"),
    "storage": ("path", "a directory the job reads or writes (optional)"),
}

# Clipboard tools, tried in order; each only where its display server is (pbcopy: macOS).
CLIPBOARD_TOOLS: Tuple[Tuple[Sequence[str], Optional[str]], ...] = (
    (("wl-copy",), "WAYLAND_DISPLAY"),
    (("xclip", "-selection", "clipboard"), "DISPLAY"),
    (("pbcopy",), None),
)


def format_duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} days"


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


# -- step 1: the job ------------------------------------------------------------------------------


@dataclass
class JobSummary:
    """One training job on this machine, as step 1 lists it."""

    pid: int  # the process to attach to: the launcher when there is one
    pids: List[int]
    launcher: str  # torchrun, accelerate, deepspeed, srun, python...
    ranks: int
    command: str
    started: Optional[float] = None
    gpus: Optional[List[int]] = None  # None: no GPU information on this machine
    log_path: Optional[str] = None
    last_line: Optional[str] = None
    log_mtime: Optional[float] = None
    user: Optional[str] = None

    def age(self, now: Optional[float] = None) -> Optional[float]:
        return None if self.started is None else (now or time.time()) - self.started

    def log_quiet(self, now: Optional[float] = None) -> Optional[float]:
        return None if self.log_mtime is None else max(0.0, (now or time.time()) - self.log_mtime)

    def headline(self, now: Optional[float] = None) -> str:
        parts = [f"pid {self.pid}", self.launcher, f"{self.ranks} rank" + ("" if self.ranks == 1 else "s")]
        if self.gpus:
            parts.append("GPU " + ",".join(map(str, self.gpus)))
        elif self.gpus is not None:
            parts.append("no GPU in use")
        if self.started is not None:
            parts.append(f"up {format_duration(self.age(now))}")
        return " | ".join(parts)

    def log_phrase(self, now: Optional[float] = None, width: int = 70) -> str:
        if not self.log_path:
            return "no log file (stdout and stderr are not files)"
        if self.last_line is None:
            return f"log {Path(self.log_path).name}: empty"
        quiet = format_duration(self.log_quiet(now))
        return f"log quiet for {quiet}: {_clip(self.last_line, width)!r}"

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _launcher_name(cmdline: List[str]) -> str:
    text = " ".join(cmdline)
    for needle, name in (
        ("torch.distributed.run", "torchrun"),
        ("torchrun", "torchrun"),
        ("torch.distributed.launch", "torch.distributed.launch"),
        ("accelerate", "accelerate"),
        ("deepspeed", "deepspeed"),
        ("srun", "srun"),
        ("lightning", "lightning"),
    ):
        if needle in text:
            return name
    return "python" if "python" in text.lower() else (Path(cmdline[0]).name if cmdline else "?")


def _gpu_map(snapshot) -> Optional[Dict[int, List[int]]]:
    """pid -> GPU indices it has memory on; None when there is no GPU information."""
    if snapshot is None or not snapshot.available:
        return None
    out: Dict[int, List[int]] = {}
    for gp in snapshot.processes:
        if gp.gpu_index >= 0:
            out.setdefault(gp.pid, []).append(gp.gpu_index)
    return out


def summarize_job(pid: int, gpu_map: Optional[Dict[int, List[int]]] = None) -> JobSummary:
    """Describe the job that process `pid` belongs to. Raises NotInspectable."""
    from probes.logtail import read_log_tail
    from probes.procs import InspectError, job_processes

    try:
        procs = job_processes([pid])
    except InspectError as exc:
        raise NotInspectable(exc.message, "check the PID with ps; give a running process of the job") from None
    pids = [p.pid for p in procs]
    launcher = next((p for p in procs if p.role == "launcher"), None)
    top = launcher or next((p for p in procs if p.ppid not in pids), procs[0])
    ranks = [p for p in procs if p.role == "rank"]
    writers = sorted(ranks, key=lambda p: (p.rank is None, p.rank or 0)) + [top]
    log_path = None
    for info in writers:
        for kind, target in ((info.fd1, info.fd1_target), (info.fd2, info.fd2_target)):
            if kind == "file" and target and not target.startswith("/dev/") and not target.endswith(" (deleted)"):
                log_path = log_path or target
    summary = JobSummary(
        pid=top.pid,
        pids=pids,
        launcher=_launcher_name(top.cmdline),
        ranks=len(ranks),
        command=" ".join(top.cmdline)[:300],
        started=top.create_time,
        user=top.username,
    )
    if gpu_map is not None:
        summary.gpus = sorted({i for p in pids for i in gpu_map.get(p, [])})
    if log_path:
        summary.log_path = log_path
        tail = read_log_tail(log_path, max_bytes=LOG_PEEK_BYTES, timeout=LOG_PEEK_SECONDS)
        summary.log_mtime = tail.mtime
        if tail.lines:
            summary.last_line = tail.lines[-1]
        elif tail.error:
            summary.last_line = tail.error
    return summary


def discover_jobs(extra_pids: Sequence[int] = (), gpu_snapshot=None) -> List[JobSummary]:
    """The training jobs on this machine (Python processes that load libtorch, by family), plus the
    jobs of `extra_pids`; a process that vanished meanwhile is left out."""
    from probes.procs import find_training_processes

    gpu_map = _gpu_map(gpu_snapshot)
    jobs: List[JobSummary] = []
    seen: set = set()
    for pid in list(dict.fromkeys(list(extra_pids) + find_training_processes())):
        if pid in seen:
            continue
        try:
            job = summarize_job(pid, gpu_map)
        except NotInspectable:
            continue
        seen.update(job.pids)
        jobs.append(job)
    return jobs


# -- step 3: GPU readings over time ----------------------------------------------------------------


@dataclass
class GpuReading:
    at: float
    util: Dict[int, Optional[float]]
    power_w: Dict[int, Optional[float]]
    power_limit_w: Dict[int, Optional[float]]


class GpuHistory:
    """GPU utilization and power readings, for the sparklines and for "0% for 40 s"."""

    def __init__(self, maxlen: int = GPU_HISTORY_READINGS):
        self.readings: Deque[GpuReading] = deque(maxlen=maxlen)
        self.available: Optional[bool] = None  # None: not read yet
        self.note: Optional[str] = None
        self.vendor: Optional[str] = None

    def add_snapshot(self, snapshot, at: Optional[float] = None) -> bool:
        """Record a probes.gpu.GpuSnapshot; True when it held a reading."""
        if snapshot is None:
            return False
        if not snapshot.available:
            if self.available is None:
                self.available = False
                self.note = snapshot.note or "no GPU found"
            return False
        self.vendor = snapshot.vendor
        return self.add_devices([d.to_dict() for d in snapshot.devices], at)

    def add_devices(self, devices: List[dict], at: Optional[float] = None) -> bool:
        """Record GPU devices as a report lists them (report.gpus)."""
        if not devices:
            return False
        self.available = True
        self.readings.append(
            GpuReading(
                at=time.time() if at is None else at,
                util={d["index"]: d.get("util") for d in devices},
                power_w={d["index"]: d.get("power_w") for d in devices},
                power_limit_w={d["index"]: d.get("power_limit_w") for d in devices},
            )
        )
        return True

    def indices(self) -> List[int]:
        return sorted({i for r in self.readings for i in r.util})

    def util_series(self, index: int) -> List[float]:
        return [r.util[index] for r in self.readings if r.util.get(index) is not None]

    def power_series(self, index: int) -> List[float]:
        return [r.power_w[index] for r in self.readings if r.power_w.get(index) is not None]

    def latest(self) -> Optional[GpuReading]:
        return self.readings[-1] if self.readings else None

    def describe_util(self, indices: Optional[Sequence[int]] = None) -> Optional[Tuple[str, str]]:
        """("idle"|"busy", one sentence) from the readings of these GPUs (default: all), or None."""
        wanted = list(indices) if indices else self.indices()
        rows = [[r.util.get(i) for i in wanted] for r in self.readings]
        rows = [row for row in rows if row and all(u is not None for u in row)]
        if not rows:
            return None
        last = rows[-1]
        busy_now = max(last) >= GPU_IDLE_UTIL
        value = "busy" if busy_now else "idle"
        # How long the GPUs have looked like this: walk back while every reading agrees.
        readings = [r for r in self.readings if all(r.util.get(i) is not None for i in wanted)]
        first = readings[-1]
        for reading in reversed(readings):
            if (max(reading.util[i] for i in wanted) >= GPU_IDLE_UTIL) != busy_now:
                break
            first = reading
        span = readings[-1].at - first.at
        where = f"on all {len(wanted)} GPUs" if len(wanted) > 1 else f"on GPU {wanted[0]}"
        if busy_now:
            lo, hi = min(last), max(last)
            level = f"{hi:.0f}%" if lo == hi else f"{lo:.0f}-{hi:.0f}%"
            if lo < GPU_IDLE_UTIL:
                where = "on GPU " + ",".join(str(i) for i, u in zip(wanted, last) if u >= GPU_IDLE_UTIL)
                level = f"{hi:.0f}%"
            what = f"GPU util is {level} {where}" if span < 1 else f"GPU util has been {level} {where}"
        else:
            what = f"GPU util is 0% {where}" if span < 1 else f"GPU util has been 0% {where}"
        if span >= 1:
            what += f" for {format_duration(span)}"
        return value, what

    def describe_power(self, indices: Optional[Sequence[int]] = None) -> Optional[Tuple[str, str]]:
        """("low"|"high", one sentence): power draw against the limit in the latest reading."""
        latest = self.latest()
        if latest is None:
            return None
        wanted = list(indices) if indices else self.indices()
        pairs = [(latest.power_w.get(i), latest.power_limit_w.get(i)) for i in wanted]
        pairs = [(w, lim) for w, lim in pairs if w is not None and lim]
        if not pairs:
            return None
        top = max(w / lim for w, lim in pairs)
        value = "low" if top < LOW_POWER_RATIO else "high"
        watts = ", ".join(f"{w:.0f} W" for w, _ in pairs)
        where = f"all {len(pairs)} GPUs" if len(pairs) > 1 else "the GPU"
        return value, f"Power draw is {watts} of a {pairs[0][1]:.0f} W limit ({top:.0%} at most) on {where}"


# -- step 2: triage --------------------------------------------------------------------------------


@dataclass
class Suggestion:
    """A pre-filled answer: the value the evidence gives, and why in one sentence."""

    key: str
    value: str
    source: str  # evidence | log
    reason: str

    @property
    def prompt(self) -> str:
        return f"{self.reason} -- correct?"


@dataclass
class ProbeOffer:
    name: str
    summary: str
    runs_user_code: bool
    timeout: float
    available: bool
    why: str  # why it is offered here
    input_kind: Optional[str] = None  # command | factory | script | path
    input_prompt: Optional[str] = None


@dataclass
class QuestionView:
    """The question to ask now, with everything a front end shows beside it."""

    question: Question
    number: int
    total: int
    suggestion: Optional[Suggestion]
    choices: List[Tuple[str, str]]  # (value, "value: meaning"), "unknown" last
    probes: List[ProbeOffer]

    @property
    def key(self) -> str:
        return self.question.key

    @property
    def default(self) -> Optional[str]:
        """The value to highlight: the suggestion, else the tree's default for this question."""
        if self.suggestion is not None:
            return self.suggestion.value
        return self.question.default


class Triage:
    """Which question comes next, given the answers so far: the walked path of the tree in order,
    then the contract's triage questions the path did not need."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.answers: Dict[str, Answer] = {}
        self.order: List[str] = []

    def walk(self, suggestions: Optional[Dict[str, Suggestion]] = None) -> Walk:
        given = {k: (a.value, a.source) for k, a in self.answers.items()}
        for key, s in (suggestions or {}).items():
            given.setdefault(key, (s.value, s.source))
        return self.tree.walk(given)

    def pending(self, suggestions: Optional[Dict[str, Suggestion]] = None) -> List[str]:
        """The questions still to ask. Suggestions stand in for unanswered questions, so the
        count assumes they will be confirmed; the next question does not depend on them."""
        walk = self.walk(suggestions)
        keys = [s.key for s in walk.steps]
        phase = self.answers.get("phase") or (suggestions or {}).get("phase")
        for key in TRIAGE_KEYS:
            if key == "step" and phase is not None and phase.value == "start":
                continue  # "the same step every time" means nothing before the first step
            keys.append(key)
        return [k for k in dict.fromkeys(keys) if k not in self.answers and k in self.tree.questions]

    def record(self, answer: Answer) -> None:
        self.answers[answer.key] = answer
        if answer.key in self.order:
            self.order.remove(answer.key)
        self.order.append(answer.key)

    def back(self) -> Optional[str]:
        if not self.order:
            return None
        key = self.order.pop()
        self.answers.pop(key, None)
        return key


# -- step 4: probes --------------------------------------------------------------------------------


@dataclass
class ProbeOutcome:
    name: str
    status: str  # ok | warn | fail | skipped | timeout (the probe's), or cancelled | error (ours)
    summary: str
    seconds: float = 0.0
    findings: List[dict] = field(default_factory=list)
    result: Optional[dict] = None  # ProbeResult.to_dict() when the probe answered

    @property
    def completed(self) -> bool:
        return self.result is not None and self.status not in ("timeout",)

    def one_line(self) -> str:
        return f"probe {self.name}: {self.status.upper()} ({self.seconds:.1f} s): {self.summary}"


def _kill_tree(proc: subprocess.Popen) -> None:
    """Stop a child we started and everything under it, by PID: freeze, then SIGKILL.

    The probe's own commands run in sessions of their own (probes.bounded.run_command), so
    killing the child's process group is not enough; its descendants are found by PID."""
    import psutil

    family: List[psutil.Process] = []
    try:
        top = psutil.Process(proc.pid)
        family = [top]
        for _ in range(5):  # freeze top-down so that nothing forks behind our back
            for member in family:
                with contextlib.suppress(psutil.Error):
                    member.suspend()
            grown = [top] + top.children(recursive=True)
            if {p.pid for p in grown} == {p.pid for p in family}:
                break
            family = grown
    except psutil.Error:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the child leads its own session
    for member in family:
        with contextlib.suppress(psutil.Error):
            member.kill()  # psutil refuses if the PID now belongs to another process
    with contextlib.suppress(subprocess.TimeoutExpired, OSError, ValueError):
        proc.communicate(timeout=5)
    with contextlib.suppress(Exception):
        psutil.wait_procs(family[1:], timeout=5)


# -- step 6: saving and copying --------------------------------------------------------------------


@dataclass
class SavedReport:
    markdown: str
    json: str

    def one_line(self) -> str:
        return f"report saved: {self.markdown} and {self.json}"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def copy_to_clipboard(text: str, timeout: float = CLIPBOARD_SECONDS) -> Optional[str]:
    """Put text on the clipboard with the first tool that works; its name, or None."""
    for argv, display in CLIPBOARD_TOOLS:
        if shutil.which(argv[0]) is None or (display and not os.environ.get(display)):
            continue
        try:
            # Output to /dev/null: xclip and wl-copy leave a child serving the selection, and it
            # must not hold our pipes open.
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            continue
        try:
            proc.communicate(text.encode("utf-8"), timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
            continue
        if proc.returncode == 0:
            return argv[0]
    return None


# -- recovery (another issue): used when assistant/recovery.py exists --------------------------------


def recovery_module():
    """assistant.recovery when it is installed and has stop() and resume(); else None."""
    try:
        if importlib.util.find_spec("assistant.recovery") is None:
            return None
        module = importlib.import_module("assistant.recovery")
    except Exception:  # a broken optional module hides its actions; it must not end the session
        return None
    if all(callable(getattr(module, name, None)) for name in ("stop", "resume")):
        return module
    return None


def _describe_result(result) -> str:
    if result is None:
        return "done"
    if isinstance(result, str):
        return result
    for name in ("one_line", "summary"):
        attr = getattr(result, name, None)
        if callable(attr):
            return str(attr())
    if hasattr(result, "to_dict"):
        return json.dumps(result.to_dict(), indent=2, default=str)
    if isinstance(result, (dict, list)):
        return json.dumps(result, indent=2, default=str)
    return str(result)


# -- the session -----------------------------------------------------------------------------------


def doing_phrase(process: dict) -> str:
    """What a process is doing, in one phrase: its main thread's innermost Python frames and
    whether its stack moved, else the kernel function it sleeps in."""
    threads = process.get("threads") or []
    main = next((t for t in threads if t.get("tid") == process.get("pid")), threads[0] if threads else None)
    motion = process.get("stack")
    if main:
        frames = [f for f in main.get("frames", []) if not f.get("native")]
        if frames:
            chain = " <- ".join(f["function"].rsplit(".", 1)[-1] for f in frames[:3])
            where = f"{frames[0]['file'].rsplit('/', 1)[-1]}:{frames[0]['line']}" if frames[0].get("line") else ""
            text = f"{chain} ({where})" if where else chain
            return f"{text} [{motion}]" if motion and motion != "unknown" else text
    if process.get("state") == "Z":
        return "exited, not reaped (zombie)"
    if process.get("wchan"):
        return f"kernel wait in {process['wchan']}"
    return process.get("stack_error") or "no stack read"


class Session:
    """One interactive session. The front end owns the threads; this owns the state and the work."""

    # Replays (RecordedSession) say so, and front ends stop sampling live data.
    live = True

    def __init__(
        self,
        knowledge: Optional[Knowledge] = None,
        *,
        pids: Sequence[int] = (),
        logs: Sequence[str] = (),
        window: float = 1.0,
        native: bool = True,
        save_dir: Optional[str] = None,
        probe_launcher: Optional[Sequence[str]] = None,
    ):
        self.knowledge = knowledge or load_knowledge()
        self.extra_pids = list(pids)  # offered in step 1 besides the jobs found
        self.window = window
        self.native = native
        self.save_dir = save_dir
        self.probe_launcher = list(probe_launcher or [sys.executable, "-m", "assistant"])
        self.job: Optional[JobSummary] = None
        self.pids: List[int] = []
        self.logs: List[str] = list(logs)
        self.evidence: Optional[Report] = None
        self.suggestions: Dict[str, Suggestion] = {}
        self.triage = Triage(self.knowledge.tree)
        self.report: Optional[Report] = None
        self.probe_results: Dict[str, ProbeOutcome] = {}
        self.gpu = GpuHistory()
        self.saved: Optional[SavedReport] = None
        self.pending_output: List[str] = []  # printed when the session ends (fixes with no clipboard)
        self.stopping = threading.Event()  # set when the user quits: running work gives up

    # -- step 1 ----------------------------------------------------------------------------------
    def discover(self) -> List[JobSummary]:
        snapshot = self._read_gpus()
        return discover_jobs(self.extra_pids, snapshot)

    def attach(self, job: JobSummary) -> JobSummary:
        self.job = job
        self.pids = list(dict.fromkeys([job.pid] + [p for p in self.extra_pids if p in job.pids]))
        self._reset_evidence()
        return job

    def attach_pid(self, text) -> JobSummary:
        """Attach to the job of a PID the user typed. Raises BadInput or NotInspectable."""
        raw = str(text).strip()
        if not raw.isdigit() or int(raw) <= 0:
            raise BadInput(f"{raw!r} is not a PID", "give the number of a process of the job (see ps or top)")
        job = summarize_job(int(raw), _gpu_map(self._read_gpus()))
        self.job = job
        self.pids = [int(raw)]
        self._reset_evidence()
        return job

    def describe(self, logs: Sequence[str] = ()) -> None:
        """No live job: triage from the answers and, when given, the training logs."""
        paths = []
        for raw in logs:
            for part in shlex.split(str(raw)):
                path = os.path.expanduser(part)
                if not os.path.isfile(path):
                    raise BadInput(f"no log file {part!r}", "give the path of a training log, or leave it empty")
                paths.append(os.path.abspath(path))
        self.job = None
        self.pids = []
        self.logs = paths
        self._reset_evidence()

    def _reset_evidence(self) -> None:
        self.evidence = None
        self.suggestions = {}
        self.report = None

    @property
    def attached(self) -> bool:
        return bool(self.pids)

    # -- step 3: evidence -----------------------------------------------------------------------
    def collect_evidence(self, progress: Optional[Say] = None) -> Report:
        """The preliminary report, with no answer of the user's: what the evidence says alone.
        Raises NotInspectable when the job cannot be read (exited, permissions)."""
        from assistant.diagnose import DiagnoseRequest, run_diagnosis

        if not self.pids and not self.logs:
            report = Report()
        else:
            request = DiagnoseRequest(
                pids=list(self.pids),
                logs=list(self.logs),
                window=self.window,
                native=self.native,
                progress=progress,
            )
            report = run_diagnosis(request, self.knowledge)
        if report.gpus:
            self.gpu.add_devices(report.gpus)
        elif report.gpu_note and self.gpu.available is None:
            self.gpu.available, self.gpu.note = False, report.gpu_note
        self.evidence = report
        self.suggestions = self.build_suggestions(report)
        return report

    def sample_gpus(self) -> bool:
        """One GPU reading for the sparklines; False when there is no GPU (stop asking then)."""
        return self._read_gpus() is not None and bool(self.gpu.available)

    def _read_gpus(self):
        if self.gpu.available is False:
            return None
        from probes.gpu import collect_gpus

        try:
            snapshot = collect_gpus(timeout=GPU_READ_SECONDS, samples=1)
        except Exception as exc:  # a GPU reading is a nicety; it must not end the session
            self.gpu.available, self.gpu.note = False, f"could not read the GPUs: {exc}"
            return None
        self.gpu.add_snapshot(snapshot)
        return snapshot

    def job_gpus(self) -> Optional[List[int]]:
        return self.job.gpus if self.job is not None and self.job.gpus else None

    # -- step 2: triage -------------------------------------------------------------------------
    def build_suggestions(self, report: Report) -> Dict[str, Suggestion]:
        """Pre-fills from the answers the evidence and the logs gave (never the user's own)."""
        from assistant.classify import Observations
        from assistant.diagnose import observe_log

        questions = self.knowledge.tree.questions
        found: Dict[str, Suggestion] = {}
        for key, entry in report.answers.items():
            question = questions.get(key)
            if question is None or entry.get("source") == "user" or entry.get("value") in (None, UNKNOWN):
                continue
            found[key] = Suggestion(key, entry["value"], entry["source"], self._reason(question, entry))
        # The report keeps only the answers on its own path; a follow-up the user may reach by
        # overriding an answer can still be pre-filled from the logs' hints.
        for log in report.logs:
            obs = Observations()
            with contextlib.suppress(Exception):
                observe_log(self.knowledge.tree, log["path"], obs)
            for key, answer in obs.derived.items():
                if key not in found and key in questions:
                    why = obs.derived_why.get(key, "")
                    entry = {"value": answer.value, "source": answer.source, "why": why}
                    found[key] = Suggestion(key, answer.value, answer.source, self._reason(questions[key], entry))
        gpu = self.gpu.describe_util(self.job_gpus())
        power = self.gpu.describe_power(self.job_gpus())
        if power is not None and "power" not in found:
            found["power"] = Suggestion("power", power[0], "evidence", power[1])
        if gpu is not None:
            value, sentence = gpu
            found["gpu"] = Suggestion("gpu", value, "evidence", sentence)
        elif "gpu" not in found and self.gpu.available is False and self.attached:
            found["gpu"] = Suggestion(
                "gpu", "idle", "evidence", "No GPU was found on this machine, so the job runs nothing on one"
            )
        return found

    @staticmethod
    def _reason(question: Question, entry: dict) -> str:
        why = " ".join(str(entry.get("why") or "").split())
        meaning = question.values.get(entry["value"], entry["value"])
        origin = "the log" if entry.get("source") == "log" else "live evidence"
        if not why:
            return f"From {origin}: {meaning}"
        return f"{why}: {meaning}"

    def next_question(self) -> Optional[QuestionView]:
        pending = self.triage.pending(self.suggestions)
        if not pending:
            return None
        question = self.knowledge.tree.questions[pending[0]]
        if question.kind == "integer":
            choices = [("1", "1: one machine")] + [(UNKNOWN, "unknown: I don't know")]
        else:
            choices = [(v, f"{v}: {meaning}") for v, meaning in question.values.items()]
            choices.append((UNKNOWN, "unknown: I don't know"))
        return QuestionView(
            question=question,
            number=len(self.triage.order) + 1,
            total=len(self.triage.order) + len(pending),
            suggestion=self.suggestions.get(question.key),
            choices=choices,
            probes=self.probe_offers(question.probes, f"answers: {question.text}"),
        )

    def answer(self, key: str, value: str) -> Answer:
        """Record the user's answer. A confirmed suggestion keeps its source (evidence or log):
        the report then says where the value came from. Raises BadInput."""
        answer = check_answer(self.knowledge.tree.questions, key, value)
        suggestion = self.suggestions.get(answer.key)
        if suggestion is not None and suggestion.value == answer.value:
            answer = Answer(answer.key, answer.value, suggestion.source)
        self.triage.record(answer)
        return answer

    def back(self) -> Optional[str]:
        return self.triage.back()

    @property
    def triage_done(self) -> bool:
        return not self.triage.pending(self.suggestions)

    # -- step 4: probes -------------------------------------------------------------------------
    def probe_offers(self, names: Sequence[str], why: str = "") -> List[ProbeOffer]:
        return [self.probe_offer(name, why) for name in dict.fromkeys(names)]

    def diagnosis_probes(self, report: Optional[Report] = None) -> List[ProbeOffer]:
        """The probes the top causes' playbooks name, best cause first."""
        report = report or self.report or self.evidence
        offers: Dict[str, ProbeOffer] = {}
        for diagnosis in report.diagnoses[:3] if report else []:
            for name in diagnosis.probes:
                if name not in offers:
                    offers[name] = self.probe_offer(name, f"settles: {diagnosis.title}")
        return list(offers.values())

    def probe_offer(self, name: str, why: str = "") -> ProbeOffer:
        from probes.targeted import REGISTRY

        kind, prompt = PROBE_INPUTS.get(name, (None, None))
        try:
            module = importlib.import_module(REGISTRY[name])
        except Exception:  # not in this version (another issue lands it), or broken
            return ProbeOffer(name, "not available in this version", False, 0.0, False, why, kind, prompt)
        return ProbeOffer(
            name,
            str(module.SUMMARY),
            bool(module.RUNS_USER_CODE),
            float(module.DEFAULT_TIMEOUT),
            True,
            why,
            kind,
            prompt,
        )

    def run_probe(
        self,
        name: str,
        consent: bool = False,
        value: str = "",
        cancel: Optional[threading.Event] = None,
        progress: Optional[Callable[[float, float], None]] = None,
    ) -> ProbeOutcome:
        """Run one probe as `debug-stuck probe NAME --format json` in a child process.

        A cancel (or the session ending) kills the child and everything it started, by PID.
        Raises BadInput when the probe is unknown or runs the user's code without consent."""
        offer = self.probe_offer(name)
        if not offer.available:
            raise BadInput(f"probe {name!r} is not available in this version", "pick another probe")
        if offer.runs_user_code and not consent:
            raise BadInput(f"probe {name!r} runs your code", "consent first; nothing was run")
        argv = self._probe_argv(offer, consent, value)
        limit = offer.timeout + PROBE_START_SECONDS + _cleanup_grace()
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
            cwd=self.save_dir or None,
        )
        out = err = ""
        try:
            while True:
                try:
                    out, err = proc.communicate(timeout=PROBE_POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - started
                    if (cancel is not None and cancel.is_set()) or self.stopping.is_set():
                        _kill_tree(proc)
                        outcome = ProbeOutcome(name, "cancelled", "cancelled; nothing is left running", elapsed)
                        return self._keep(outcome)
                    if elapsed > limit:
                        _kill_tree(proc)
                        return self._keep(ProbeOutcome(name, "timeout", f"no answer within {limit:.0f} s", elapsed))
                    if progress is not None:
                        progress(elapsed, offer.timeout)
        except BaseException:
            _kill_tree(proc)
            raise
        seconds = time.monotonic() - started
        try:
            result = json.loads(out)
        except ValueError:
            lines = [ln for ln in (err or "").splitlines() if ln.strip()]
            why = lines[-1] if lines else f"exit code {proc.returncode}, no output"
            return self._keep(ProbeOutcome(name, "error", why.replace("debug-stuck: error: ", ""), seconds))
        return self._keep(
            ProbeOutcome(
                name,
                str(result.get("status", "fail")),
                str(result.get("summary", "")),
                float(result.get("seconds", seconds)),
                list(result.get("findings", [])),
                result,
            )
        )

    def _probe_argv(self, offer: ProbeOffer, consent: bool, value: str) -> List[str]:
        argv = [*self.probe_launcher, "probe", offer.name, "--format", "json", "--timeout", f"{offer.timeout:g}"]
        for pid in self.pids:
            argv += ["--pid", str(pid)]
        if consent:
            argv.append("--allow-exec")
        value = (value or "").strip()
        if value and offer.input_kind in ("factory", "script", "path"):
            argv += [f"--{offer.input_kind}", value]
        if value and offer.input_kind == "command":
            argv += ["--", *shlex.split(value)]
        return argv

    def _keep(self, outcome: ProbeOutcome) -> ProbeOutcome:
        self.probe_results[outcome.name] = outcome
        return outcome

    # -- step 5: diagnosis ----------------------------------------------------------------------
    def request_answers(self) -> Dict[str, Answer]:
        return dict(self.triage.answers)

    def diagnose(self, progress: Optional[Say] = None, live: bool = True) -> Report:
        """The final report: `run_diagnosis` with the user's answers, the live job (unless
        live=False, e.g. after it exited) and the probes that ran. Raises NotInspectable."""
        from assistant.diagnose import DiagnoseRequest, run_diagnosis

        logs = list(self.logs)
        if not live and self.evidence is not None:
            logs += [entry["path"] for entry in self.evidence.logs if entry.get("path") not in logs]
        # Probes that read (not run code) are run again inside the diagnosis, so their findings
        # weigh in the ranking exactly as with `diagnose --probe`; results of probes that ran the
        # user's code (which needs input the core's probe call cannot pass) are attached as run.
        rerun = [
            name
            for name, outcome in self.probe_results.items()
            if outcome.completed and not self.probe_offer(name).runs_user_code
        ]
        request = DiagnoseRequest(
            answers=self.request_answers(),
            pids=list(self.pids) if live else [],
            logs=logs,
            window=self.window,
            native=self.native,
            progress=progress,
            probes=rerun,
        )
        report = run_diagnosis(request, self.knowledge)
        ran = {p.get("name") for p in report.probes}
        for name, outcome in self.probe_results.items():
            if name not in ran and outcome.result is not None:
                report.probes.append(outcome.result)
        self.report = report
        return report

    # -- step 6: recovery -----------------------------------------------------------------------
    def save_report(
        self, report: Optional[Report] = None, directory: Optional[str] = None, now: Optional[float] = None
    ) -> SavedReport:
        """Write debug-stuck-report-<timestamp>.md and .json. Raises BadInput when it cannot."""
        from assistant.render_markdown import render_markdown

        report = report or self.report
        if report is None:
            raise BadInput("there is no report to save yet", "finish the diagnosis first")
        folder = Path(os.path.expanduser(directory or self.save_dir or os.getcwd()))
        if not folder.is_dir():
            raise BadInput(f"{folder} is not a directory", "give an existing directory to save the report in")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
        base = folder / f"{REPORT_PREFIX}{stamp}"
        n = 1
        while base.with_suffix(".md").exists() or base.with_suffix(".json").exists():
            n += 1
            base = folder / f"{REPORT_PREFIX}{stamp}-{n}"
        md, js = base.with_suffix(".md"), base.with_suffix(".json")
        try:
            _write_atomic(md, render_markdown(report))
            _write_atomic(js, json.dumps(report.to_dict(), indent=2) + "\n")
        except OSError as exc:
            raise BadInput(
                f"cannot write the report in {folder}: {exc.strerror or exc}", "give a writable directory"
            ) from None
        self.saved = SavedReport(str(md), str(js))
        return self.saved

    def fix_commands(self, report: Optional[Report] = None, cause: Optional[str] = None) -> List[Tuple[str, str]]:
        """(fix title, command block) of one diagnosis (default: the top one)."""
        report = report or self.report
        if report is None or not report.diagnoses:
            return []
        diagnosis = next((d for d in report.diagnoses if d.cause == cause), report.diagnoses[0])
        return [(fix.title, command) for fix in diagnosis.fixes for command in fix.commands]

    def copy_fixes(self, report: Optional[Report] = None, cause: Optional[str] = None) -> str:
        """Copy the fix commands; with no clipboard tool, keep them to print at the end."""
        fixes = self.fix_commands(report, cause)
        if not fixes:
            return "no fix commands to copy"
        text = "\n\n".join(f"# {title}\n{command}" for title, command in fixes) + "\n"
        tool = copy_to_clipboard(text)
        if tool:
            return f"copied {len(fixes)} fix command block(s) to the clipboard ({tool})"
        if text not in self.pending_output:
            self.pending_output.append(text)
        return "no clipboard tool (wl-copy, xclip, pbcopy): the fix commands will be printed when you quit"

    def take_pending_output(self) -> str:
        text = ""
        if self.pending_output:
            text = "Fix commands (copy them from here):\n\n" + "\n".join(self.pending_output)
        self.pending_output = []
        return text

    def recovery_actions(self) -> List[str]:
        """'stop' and 'resume' once assistant/recovery.py exists and a job is attached."""
        return ["stop", "resume"] if self.attached and recovery_module() is not None else []

    def run_recovery(self, action: str) -> str:
        """Call assistant.recovery.stop/resume for the attached job (the front end has asked for
        confirmation before 'stop'). Returns what it said, in text."""
        module = recovery_module()
        if module is None or action not in ("stop", "resume"):
            raise BadInput(f"no recovery action {action!r} here", "valid: " + ", ".join(self.recovery_actions()))
        fn = getattr(module, action)
        params = inspect.signature(fn).parameters
        kwargs: dict = {}
        if "pids" in params:
            kwargs["pids"] = list(self.pids)
        elif "pid" in params:
            kwargs["pid"] = self.job.pid if self.job else self.pids[0]
        for name in ("yes", "confirm", "confirmed", "assume_yes"):
            if name in params:
                kwargs[name] = True
        if "report" in params:
            kwargs["report"] = self.report
        if "report_dir" in params:
            kwargs["report_dir"] = str(Path(self.saved.json).parent) if self.saved else self.save_dir
        if "knowledge" in params:
            kwargs["knowledge"] = self.knowledge
        result = fn(**kwargs)
        if action == "resume" and self.report is not None and callable(getattr(result, "to_dict", None)):
            self.report.resume = result.to_dict()  # the report's `resume` object, saved with it
        return _describe_result(result)

    def shutdown(self) -> None:
        """The user quits: running probes are killed, samplers stop."""
        self.stopping.set()


def _cleanup_grace() -> float:
    from probes.targeted import CLEANUP_GRACE

    return float(CLEANUP_GRACE)


class RecordedSession(Session):
    """A session that replays a recorded report: reads no process and runs nothing.

    For tests, screenshots and demos: the evidence and the diagnosis are the recorded report,
    step 1 lists the recorded jobs, and the GPU history is what was recorded."""

    live = False

    def __init__(
        self,
        report: Report,
        knowledge: Optional[Knowledge] = None,
        *,
        jobs: Sequence[JobSummary] = (),
        gpu_history: Optional[GpuHistory] = None,
        probe_offers: Sequence[ProbeOffer] = (),
        save_dir: Optional[str] = None,
    ):
        super().__init__(knowledge, save_dir=save_dir)
        self.recorded = report
        self.recorded_jobs = list(jobs)
        self.recorded_offers = {o.name: o for o in probe_offers}
        if gpu_history is not None:
            self.gpu = gpu_history
        elif self.gpu.available is None:
            self.gpu.available, self.gpu.note = False, report.gpu_note or "no GPU in the recording"

    def discover(self) -> List[JobSummary]:
        return list(self.recorded_jobs)

    def attach_pid(self, text) -> JobSummary:
        raw = str(text).strip()
        job = next((j for j in self.recorded_jobs if raw.isdigit() and int(raw) in j.pids), None)
        if job is None:
            raise NotInspectable(f"process {raw} is not in the recording", "pick a recorded job")
        return self.attach(job)

    def collect_evidence(self, progress: Optional[Say] = None) -> Report:
        if progress is not None:
            progress("replaying the recorded evidence")
        self.evidence = self.recorded
        self.suggestions = self.build_suggestions(self.recorded)
        return self.recorded

    def build_suggestions(self, report: Report) -> Dict[str, Suggestion]:
        questions = self.knowledge.tree.questions
        found = {}
        for key, entry in report.answers.items():
            if key in questions and entry.get("source") in ("evidence", "log"):
                found[key] = Suggestion(key, entry["value"], entry["source"], self._reason(questions[key], entry))
        gpu = self.gpu.describe_util(self.job_gpus())
        if gpu is not None:
            found["gpu"] = Suggestion("gpu", gpu[0], "evidence", gpu[1])
        power = self.gpu.describe_power(self.job_gpus())
        if power is not None:
            found["power"] = Suggestion("power", power[0], "evidence", power[1])
        return found

    def sample_gpus(self) -> bool:
        return False  # the recording does not grow

    def recovery_actions(self) -> List[str]:
        return []  # a replay must never signal a process: the recorded PIDs may be anyone's now

    def probe_offer(self, name: str, why: str = "") -> ProbeOffer:
        recorded = self.recorded_offers.get(name)
        if recorded is None:
            return super().probe_offer(name, why)
        return ProbeOffer(**dict(recorded.__dict__, why=why or recorded.why))

    def _read_gpus(self):
        return None

    def run_probe(self, name, consent=False, value="", cancel=None, progress=None) -> ProbeOutcome:
        recorded = next((p for p in self.recorded.probes if p.get("name") == name), None)
        if recorded is None:
            return self._keep(ProbeOutcome(name, "skipped", "not run: this is a replay of a recorded report"))
        return self._keep(
            ProbeOutcome(name, recorded.get("status", "ok"), recorded.get("summary", ""), 0.0, [], recorded)
        )

    def diagnose(self, progress: Optional[Say] = None, live: bool = True) -> Report:
        if progress is not None:
            progress("replaying the recorded diagnosis")
        self.report = self.recorded
        return self.recorded
