"""dataloader: fetch a few batches from the user's Dataset or DataLoader, with workers and without.

`--factory MODULE:FUNCTION` names a function (importable from the current directory or a `--path`) that
returns a torch Dataset or DataLoader. A child process imports it and fetches `--batches` batches,
first with the workers as given (`--num-workers`, else the DataLoader's own, else 2) and then with
num_workers=0, reporting the time to the first batch and per batch of each. A setting that delivers
nothing for its share of the time limit is a hang: the child and its workers have their stacks
dumped (py-spy, native frames, kernel wait channel and syscall) and are killed, and the next
setting runs in a fresh child. Worker crashes (killed by a signal, exited unexpectedly, bus error)
come back as the DataLoader's own error.

Verdicts: workers hang but num_workers=0 works -> dataloader; both hang -> io-stall when the stuck
thread waits in open/read (or the kernel says so), else bad-sample; a worker crash -> dataloader;
a first batch slower than SLOW_FIRST_BATCH_S -> warn.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from debug_stuck.bounded import run_tree
from debug_stuck.core.owncode import is_library_code
from debug_stuck.interpreter import isolated_python_code
from debug_stuck.probes.targeted.base import OOM_CHECK, Finding, ProbeContext, ProbeResult, ProbeUsageError, signal_name

NAME = "dataloader"

DEFAULT_WORKERS = 2
SLOW_FIRST_BATCH_S = 10.0
MIN_HANG_S = 2.0  # never call a setting hung sooner than this
HANG_OVERHEAD_S = 2.0  # stack dumps and the kill, per hung setting
MARK = "@@debug-stuck-dataloader@@ "
MAX_OUTPUT_LINES = 20

_RUNNER = r"""
import importlib, json, os, sys, time, traceback
MARK = "@@debug-stuck-dataloader@@ "

def emit(**info):
    sys.stdout.write(MARK + json.dumps(info, default=str) + "\n")
    sys.stdout.flush()

def user_frame(tb):
    frames = traceback.extract_tb(tb)
    for fr in reversed(frames):
        name = fr.filename.replace(os.sep, "/")
        if "/torch/" not in name and not name.startswith("<"):
            return "%s (%s:%s)" % (fr.name, name, fr.lineno)
    return None

def failed(kind, exc, **info):
    emit(event=kind, type=type(exc).__name__, message=str(exc)[:2000], where=user_frame(exc.__traceback__), **info)

factory, path, settings, batches = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
for entry in reversed([p for p in path.split(os.pathsep) if p]):
    sys.path.insert(0, entry)
module_name, _, attr = factory.partition(":")
try:
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    made = obj()
except BaseException as exc:
    emit(event="load-error", type=type(exc).__name__, message=str(exc)[:2000], where=user_frame(exc.__traceback__),
         traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:])
    sys.exit(3)

import torch.utils.data as tud

if isinstance(made, tud.DataLoader):
    loader, own = made, made.num_workers
elif hasattr(made, "__getitem__") or hasattr(made, "__iter__"):
    loader, own = None, None
else:
    failed("load-error", TypeError("%s returned %s, not a Dataset or DataLoader" % (factory, type(made).__name__)))
    sys.exit(3)
dataset = loader.dataset if loader is not None else made
try:
    length = len(dataset)
except Exception:
    length = None
emit(event="loaded", kind="DataLoader" if loader is not None else "Dataset", own_num_workers=own,
     dataset=type(dataset).__name__, length=length,
     batch_size=getattr(loader, "batch_size", None) if loader is not None else None)

def build(n):
    if loader is not None and n == loader.num_workers:
        return loader  # exactly the user's configuration
    if loader is None:
        # One sample per batch and no collation: any sample type works, nothing to pickle.
        return tud.DataLoader(dataset, batch_size=None, num_workers=n)
    kw = dict(num_workers=n, collate_fn=loader.collate_fn, pin_memory=loader.pin_memory, timeout=loader.timeout,
              worker_init_fn=loader.worker_init_fn, generator=loader.generator)
    if n > 0:
        kw.update(multiprocessing_context=loader.multiprocessing_context, prefetch_factor=loader.prefetch_factor or 2)
    if isinstance(dataset, tud.IterableDataset):
        return tud.DataLoader(dataset, batch_size=loader.batch_size, drop_last=loader.drop_last, **kw)
    if loader.batch_sampler is not None:
        return tud.DataLoader(dataset, batch_sampler=loader.batch_sampler, **kw)
    return tud.DataLoader(dataset, batch_size=None, sampler=loader.sampler, **kw)

plan = []
for setting in settings:
    n = (own if own is not None else %(default)d) if setting == "auto" else int(setting)
    if n not in plan:
        plan.append(n)
emit(event="plan", num_workers=plan)
for n in plan:
    try:
        dl = build(n)
    except BaseException as exc:
        failed("error", exc, num_workers=n)
        continue
    emit(event="setting", num_workers=n)
    started = time.perf_counter()
    it = None
    try:
        it = iter(dl)
        emit(event="workers", num_workers=n, pids=[w.pid for w in getattr(it, "_workers", [])])
        for i in range(batches):
            try:
                next(it)
            except StopIteration:
                emit(event="exhausted", num_workers=n, batches=i)
                break
            emit(event="batch", num_workers=n, i=i, seconds=time.perf_counter() - started)
        del it  # shuts the workers down before the next setting starts its own
        emit(event="done", num_workers=n, seconds=time.perf_counter() - started)
    except BaseException as exc:
        # how each worker ended (multiprocessing's exitcode: negative for a signal), for the report
        ends = [[w.pid, w.exitcode] for w in getattr(it, "_workers", []) if w.exitcode is not None]
        failed("error", exc, num_workers=n, seconds=time.perf_counter() - started, worker_ends=ends)
""".replace("%(default)d", str(DEFAULT_WORKERS))

_CRASH = re.compile(
    r"DataLoader worker \(pid\(?s?\)? [^)]*\) (?:exited unexpectedly|is killed by signal)|Bus error|"
    r"insufficient shared memory|worker.*(?:killed|died|segfault)",
    re.IGNORECASE,
)
_TIMED_OUT = re.compile(r"DataLoader timed out after")
_WORKER_SAID = re.compile(r"segmentation fault|bus error|killed|out of memory|shared memory|core dumped", re.I)

# What a thread blocked in file or socket I/O looks like, from three angles.
_IO_SYSCALLS = {
    "x86_64": {0, 2, 4, 5, 6, 17, 19, 45, 47, 85, 257, 262, 295, 332, 437},
    "aarch64": {56, 63, 65, 67, 69, 79, 80, 207, 212, 291, 437},
}
_IO_WCHAN = re.compile(
    r"pipe_read|wait_for_partner|fifo_open|rpc_wait|nfs|fuse|folio_wait|wait_on_page|io_schedule|blkdev|"
    r"jbd2|ext4|xfs|btrfs|sk_wait_data|inet_csk_accept|unix_stream_read|wait_woken"
)
_IO_NATIVE = re.compile(
    r"(^|_)(read|pread|pread64|readv|preadv|open|open64|openat|openat64|fopen|fopen64|fread|recv|recvfrom|recvmsg|"
    r"stat|stat64|statx|fstatat|fstatat64|lstat)(_nocancel)?$"
)
_IO_PYTHON = {"read", "readinto", "readline", "readlines", "read1", "open", "recv", "recv_into", "peek"}


@dataclass
class Setting:
    num_workers: int
    status: str = "not-run"  # ok | hang | slow (out of time, no sign of a hang) | crash | error | not-run
    batches: int = 0
    batch_times: List[float] = field(default_factory=list)  # seconds since the setting started
    seconds: Optional[float] = None
    started: Optional[float] = None  # monotonic, in this process
    progress: Optional[float] = None  # monotonic time of the last batch (or of the start)
    error: Optional[str] = None
    error_type: Optional[str] = None
    where: Optional[str] = None
    stuck: Optional[dict] = None
    exhausted: bool = False
    context: Optional[str] = None  # what the worker said before dying (its signal, "Bus error"...)
    worker_pids: List[int] = field(default_factory=list)
    hang_after: Optional[float] = None  # the silence that counted as a hang for this setting

    @property
    def thread(self) -> dict:
        """The thread found stuck fetching (stacks taken before the kill), or {}."""
        return (self.stuck or {}).get("thread") or {}

    @property
    def first_batch(self) -> Optional[float]:
        return self.batch_times[0] if self.batch_times else None

    @property
    def per_batch(self) -> Optional[float]:
        if len(self.batch_times) < 2:
            return None
        return (self.batch_times[-1] - self.batch_times[0]) / (len(self.batch_times) - 1)

    def to_dict(self) -> dict:
        out = {
            "num_workers": self.num_workers,
            "status": self.status,
            "batches": self.batches,
            "first_batch_s": _round(self.first_batch),
            "per_batch_s": _round(self.per_batch),
            "seconds": _round(self.seconds),
            "hang_after_s": _round(self.hang_after),
        }
        if self.exhausted:
            out["exhausted"] = True
        if self.error:
            out["error"] = self.error
            out["error_type"] = self.error_type
        if self.where:
            out["where"] = self.where
        if self.stuck:
            out["stuck"] = self.stuck
        return out

    def describe(self) -> str:
        if self.status == "ok":
            text = f"first batch {self.first_batch:.2f} s" if self.first_batch is not None else "no batches"
            if self.per_batch is not None:
                text += f", {self.per_batch:.3f} s/batch"
            return text
        if self.status == "hang":
            since = (self.seconds or 0) - (self.batch_times[-1] if self.batch_times else 0)
            return f"no batch for {since:.0f} s after {self.batches} batch(es)"
        return f"{self.status}: {self.error or '?'}"


def _round(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 3)


class _Run:
    """Events of one child process, with the hang bound of the setting in progress."""

    def __init__(self, limit: float, budget: float, settings_asked: int):
        self.limit = limit  # the longest a setting may go without a batch
        self.born = time.monotonic()
        self.deadline = self.born + budget
        self.asked = settings_asked
        self.load_seconds: Optional[float] = None
        self.plan: List[int] = []  # the settings the child resolved ("auto" made a number)
        self.loaded: Optional[dict] = None
        self.load_error: Optional[dict] = None
        self.settings: Dict[int, Setting] = {}
        self.current: Optional[Setting] = None
        self.output: List[str] = []
        self.hung: Optional[Setting] = None
        self.dead_workers: List[dict] = []

    def on_line(self, line: str) -> None:
        # Workers share the pipe and may leave a line unfinished ("ERROR: Unexpected segmentation
        # fault encountered in worker." has no newline): the mark can be anywhere in the line.
        at = line.find(MARK)
        if at < 0 or at > 0:
            text = line[: at if at > 0 else None].replace("\x00", "")
            if text.strip():
                self.output.append(text[:300])
                del self.output[:-MAX_OUTPUT_LINES]
            if at < 0:
                return
        try:
            event = json.loads(line[at + len(MARK) :])
        except ValueError:
            return
        kind = event.get("event")
        if kind == "loaded":
            self.loaded = event
            self.load_seconds = time.monotonic() - self.born
        elif kind == "plan":
            self.plan = [int(n) for n in event.get("num_workers") or []]
            self.asked = len(self.plan) or self.asked
        elif kind == "load-error":
            self.load_error = event
        elif kind == "setting":
            n = int(event["num_workers"])
            self.current = self.settings.setdefault(n, Setting(n))
            self.current.started = self.current.progress = time.monotonic()
            self._share_time()
            self.current.hang_after = self.limit
        elif kind == "workers":
            setting = self.settings.setdefault(int(event["num_workers"]), Setting(int(event["num_workers"])))
            setting.worker_pids = [int(p) for p in event.get("pids") or []]
        elif kind in ("batch", "done", "exhausted", "error"):
            n = int(event.get("num_workers", -1))
            setting = self.settings.setdefault(n, Setting(n))
            if kind == "batch":
                setting.batches += 1
                setting.batch_times.append(float(event["seconds"]))
                setting.progress = time.monotonic()
            elif kind == "exhausted":
                setting.exhausted = True
            elif kind == "done":
                setting.status, setting.seconds = "ok", float(event["seconds"])
                self.current = None
            else:
                message = str(event.get("message") or "")
                setting.error = f"{event.get('type')}: {message}"[:1000]
                setting.error_type = event.get("type")
                setting.where = event.get("where")
                setting.seconds = event.get("seconds")
                if _TIMED_OUT.search(message):
                    setting.status = "hang"
                elif _CRASH.search(message):
                    setting.status = "crash"
                    ends = [_exit_of(pid, code) for pid, code in event.get("worker_ends") or []]
                    said = [line for line in self.output if _WORKER_SAID.search(line)]
                    context = "; ".join(e for e in ends if e) or (said[-1].strip() if said else "")
                    if any(e.endswith("SIGKILL") for e in ends):
                        context += OOM_HINT
                    setting.context = context[:300] or None
                else:
                    setting.status = "error"
                self.current = None

    def _share_time(self) -> None:
        """Shorten the hang bound so that the settings after this one still get their turn: a hang
        here costs this child, and the next setting pays for a fresh child's imports."""
        following = self.asked - len(self.settings)
        if following <= 0:
            return
        reserve = (self.load_seconds or 5.0) * 1.3 + HANG_OVERHEAD_S
        left = self.deadline - time.monotonic()
        share = (left - reserve * following) / (following + 1)
        self.limit = max(MIN_HANG_S, min(self.limit, share))

    def stop_when(self) -> bool:
        cur = self.current
        if cur is not None and cur.progress is not None and time.monotonic() - cur.progress > self.limit:
            self.hung = cur
            return True
        return False


# --- stacks of a stuck run ------------------------------------------------------------------------


def _read_small(path: str) -> Optional[str]:
    try:
        with open(path) as fh:
            return fh.read(512).strip()
    except OSError:
        return None


def _thread_kernel_wait(pid: int, tid: int) -> dict:
    wchan = _read_small(f"/proc/{pid}/task/{tid}/wchan")
    syscall = _read_small(f"/proc/{pid}/task/{tid}/syscall")
    number = None
    if syscall and syscall.split()[0].lstrip("-").isdigit():
        number = int(syscall.split()[0])
    return {"wchan": wchan if wchan not in (None, "0") else None, "syscall": number}


def _io_wait(frames: list, kernel: dict) -> Optional[str]:
    """Why this thread looks blocked in I/O, or None."""
    import platform

    if kernel.get("wchan") and _IO_WCHAN.search(kernel["wchan"]):
        return f"kernel wait channel {kernel['wchan']}"
    table = _IO_SYSCALLS.get(platform.machine(), set())
    if kernel.get("syscall") is not None and kernel["syscall"] in table:
        return f"blocked in syscall {kernel['syscall']} (file/socket I/O)"
    for frame in frames[:8]:
        if frame.native and _IO_NATIVE.search(frame.function.split("@")[0]):
            return f"native frame {frame.function}"
    python = [f for f in frames if not f.native]
    if python and python[0].bare_name in _IO_PYTHON:
        return f"Python frame {python[0].text()}"
    return None


def _user_frames(frames: list, roots: Sequence[str]) -> list:
    """The frames of the user's code: under the folders the probe put on sys.path, or not a library's
    (core.owncode); never the probe's own runner (`python -c`: `<string>`) or a `<frozen ...>` module."""
    return [
        f
        for f in frames
        if not f.native and not (f.file or "").startswith("<") and not is_library_code(f.file, f.path, roots)
    ]


def dump_tree(root_pid: int, roots: Sequence[str] = (), timeout: float = 4.0) -> List[dict]:
    """Stacks of the child and its workers, with the kernel's view of each thread; never raises."""
    import psutil

    from debug_stuck.probes.collectors.stacks import sample_stacks

    pids = [root_pid]
    try:
        pids += [c.pid for c in psutil.Process(root_pid).children(recursive=True)]
    except psutil.Error:
        pass
    series = sample_stacks(pids, samples=1, native=True, timeout=timeout)
    out = []
    for pid in pids:
        entry = series.get(pid)
        dump = entry.latest() if entry else None
        record = {"pid": pid, "role": "main" if pid == root_pid else "worker", "threads": []}
        if dump is None:
            record["error"] = entry.error if entry else "not sampled"
            out.append(record)
            continue
        for thread in dump.threads:
            kernel = _thread_kernel_wait(pid, thread.tid)
            user = _user_frames(thread.frames, roots)
            record["threads"].append(
                {
                    "tid": thread.tid,
                    "state": thread.state,
                    "frames": [f.text() for f in thread.frames[:12]],
                    "user_frames": [f.text() for f in user[:6]],
                    "python_frames": [f.text() for f in thread.frames if not f.native][:6],
                    "in_fetch": any(f.bare_name == "fetch" and "_utils/fetch" in f.file for f in thread.frames),
                    "io_wait": _io_wait(thread.frames, kernel),
                    **kernel,
                }
            )
        out.append(record)
    return out


def stuck_thread(processes: List[dict]) -> Optional[dict]:
    """The thread stuck fetching a sample: in the dataset's code under torch's fetch, workers first."""
    best = None
    for proc in sorted(processes, key=lambda p: p["role"] != "worker"):
        for thread in proc.get("threads", []):
            score = (2 if thread["in_fetch"] else 0) + (1 if thread["user_frames"] else 0)
            if score and (best is None or score > best[0]):
                best = (score, dict(thread, pid=proc["pid"], role=proc["role"]))
    return best[1] if best else None


# --- the probe ------------------------------------------------------------------------------------


def _run_child(
    argv: list, cwd: Optional[str], limit: float, budget: float, asked: int, roots: Sequence[str] = ()
) -> _Run:
    run = _Run(limit, budget, asked)

    def before_kill(root_pid: int) -> None:
        target = run.hung or run.current
        if target is not None and target.worker_pids:
            # A worker that died shows as a hang when the DataLoader has not noticed yet (it checks
            # every few seconds): read how each worker ended before anything is killed.
            run.dead_workers = [d for d in (worker_end(pid) for pid in target.worker_pids) if d is not None]
        if run.hung is not None or run.current is not None or run.loaded is None:
            processes = dump_tree(root_pid, roots)
            target = run.hung or run.current
            if target is not None:
                target.stuck = {"processes": processes, "thread": stuck_thread(processes)}
            else:
                run.load_error = {
                    "type": "Timeout",
                    "message": "the factory did not return in time",
                    "stuck": {"processes": processes, "thread": stuck_thread(processes) or _main_thread(processes)},
                }

    result = run_tree(argv, budget, cwd=cwd, on_line=run.on_line, before_kill=before_kill, stop_when=run.stop_when)
    hung = run.hung or run.current
    if hung is not None and run.dead_workers:
        hung.status = "crash"
        hung.error = "; ".join(d["text"] for d in run.dead_workers)
        run.current = None if run.current is hung else run.current
    cur = run.current
    if cur is not None:  # the setting in progress never finished
        if result.returncode is None:
            cur.status = "hang"
            cur.seconds = time.monotonic() - (cur.started or time.monotonic())
        else:
            cur.status = "crash"
            cur.error = f"the process died ({_exit_text(result.returncode)}) while fetching"
    elif run.loaded is None and run.load_error is None:
        if result.returncode is None:
            run.load_error = {"type": "Timeout", "message": "the factory did not return in time"}
        elif result.returncode != 0:
            run.load_error = {"type": "Exit", "message": f"the child exited ({_exit_text(result.returncode)})"}
    return run


def _main_thread(processes: List[dict]) -> Optional[dict]:
    for proc in processes:
        if proc["role"] == "main" and proc.get("threads"):
            return dict(proc["threads"][0], pid=proc["pid"], role="main")
    return None


OOM_HINT = f": the kernel's OOM killer sends SIGKILL; see {OOM_CHECK}"


def _exit_of(pid, code) -> str:
    """multiprocessing's exitcode of a worker in words (negative: the signal that ended it)."""
    if not isinstance(code, int) or code == 0:
        return ""
    if code > 0:
        return f"worker {pid} exited with code {code}"
    return f"worker {pid} was killed by {signal_name(-code)}"


def worker_end(pid: int) -> Optional[dict]:
    """How a worker ended, read from /proc (its exit status stays readable while it is a zombie
    nobody reaped): None while it runs."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return {"pid": pid, "text": f"DataLoader worker (pid {pid}) exited unexpectedly (already reaped)"}
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields[0] != "Z":
        return None
    status = int(fields[49]) if len(fields) > 49 else None  # exit_code, as waitpid reports it
    if status is None:
        return {"pid": pid, "text": f"DataLoader worker (pid {pid}) exited unexpectedly"}
    if status & 0x7F:
        name = signal_name(status & 0x7F)
        hint = OOM_HINT if name == "SIGKILL" else ""
        return {"pid": pid, "signal": name, "text": f"DataLoader worker (pid {pid}) is killed by signal {name}{hint}"}
    code = (status >> 8) & 0xFF
    return {"pid": pid, "code": code, "text": f"DataLoader worker (pid {pid}) exited unexpectedly with code {code}"}


def _exit_text(code: Optional[int]) -> str:
    if code is None:
        return "killed at the time limit"
    if code < 0:
        import signal

        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def run(ctx: ProbeContext) -> ProbeResult:
    if not ctx.factory:
        raise ProbeUsageError(
            "give --factory MODULE:FUNCTION, a function that returns your Dataset or DataLoader "
            "(e.g. --factory train:make_loader, run from the folder of train.py or with --path)"
        )
    module, sep, function = ctx.factory.partition(":")
    if not sep or not module or not function:
        raise ProbeUsageError(f"--factory {ctx.factory!r} must look like MODULE:FUNCTION (e.g. data:make_dataset)")
    if ctx.num_workers is not None and ctx.num_workers < 0:
        raise ProbeUsageError("--num-workers must be 0 or more")
    batches = max(1, int(ctx.batches if ctx.batches is not None else 5))
    cwd = ctx.cwd or os.getcwd()
    # The factory's module is looked up in the working directory, then in the --path folders.
    search = os.pathsep.join([cwd, *[os.path.abspath(p) for p in ctx.paths]])
    first = "auto" if ctx.num_workers is None else str(ctx.num_workers)
    plan = [first] if first == "0" else [first, "0"]

    started = time.monotonic()
    # Kept back for the stack dumps (4 s at most) and the kill, so the probe returns in its bound.
    budget = max(2.0, ctx.timeout - min(5.0, ctx.timeout * 0.15))
    limit = max(1.0, min(budget * 0.3, 60.0))  # a setting silent for this long is hung

    def remaining() -> float:
        return budget - (time.monotonic() - started)

    settings: Dict[int, Setting] = {}
    loaded: Optional[dict] = None
    load_error: Optional[dict] = None
    output: List[str] = []
    todo = list(plan)
    auto: Optional[int] = None  # what "auto" resolved to (the DataLoader's own num_workers, or 2)
    # One child runs every setting left; a hung setting costs that child, and the next one starts
    # with the settings that did not run.
    while todo and remaining() > 1.0:
        ctx.progress(f"fetching {batches} batch(es) with num_workers={','.join(todo)}")
        argv = [*isolated_python_code(_RUNNER), ctx.factory, search, ",".join(todo), str(batches)]
        child = _run_child(argv, cwd, limit, remaining(), len(todo), search.split(os.pathsep))
        loaded = loaded or child.loaded
        output = child.output or output
        if child.load_error is not None:
            # A later child that runs out of time while importing is out of budget, not broken.
            if not (len(todo) < len(plan) and child.load_error.get("type") == "Timeout"):
                load_error = child.load_error
            break
        if not child.settings:
            break
        if todo[0] == "auto":
            auto = child.plan[0] if child.plan else next(iter(child.settings))
        settings.update(child.settings)
        todo = [t for t in todo if (auto if t == "auto" else int(t)) not in settings]

    data = {
        "factory": ctx.factory,
        "cwd": cwd,
        "batches_asked": batches,
        "hang_after_s": round(limit, 1),
        "loaded": {k: v for k, v in loaded.items() if k != "event"} if loaded else None,
        "settings": [s.to_dict() for s in settings.values()],
        "works": [n for n, s in settings.items() if s.status == "ok"],
        "output_tail": output,
    }
    if load_error is not None:
        data["load_error"] = load_error
        return _load_failure(load_error, data)
    if not settings:
        return ProbeResult(NAME, "fail", "no setting could run within the time limit", data=data)
    status, summary, findings = judge(list(settings.values()), batches)
    return ProbeResult(NAME, status, summary, data=data, findings=findings)


def _load_failure(error: dict, data: dict) -> ProbeResult:
    if error.get("type") == "Timeout":
        thread = (error.get("stuck") or {}).get("thread") or {}
        where = (thread.get("user_frames") or thread.get("python_frames") or ["?"])[0]
        io = thread.get("io_wait")
        cause = "io-stall" if io else None
        msg = f"the factory did not return within the time limit; stuck at {where}" + (f" ({io})" if io else "")
        return ProbeResult(NAME, "fail", msg, data=data, findings=[Finding("fail", msg, cause)])
    where = f" at {error['where']}" if error.get("where") else ""
    msg = f"could not load the factory: {error.get('type')}: {error.get('message')}{where}"
    return ProbeResult(NAME, "fail", msg[:300], data=data, findings=[Finding("fail", msg[:500])])


def _where(setting: Setting) -> str:
    thread = setting.thread
    user = thread.get("user_frames") or []
    python = [f for f in thread.get("python_frames") or []]
    if not user and not python:
        return ""
    text = f" in the {thread.get('role', 'process')} (pid {thread.get('pid')}) at {(user or python)[0]}"
    if user and python and python[0] != user[0]:
        text += f", waiting in {python[0]}"
    return text


def _hang_cause(setting: Setting) -> tuple:
    io = setting.thread.get("io_wait")
    return ("io-stall", f" ({io})") if io else ("bad-sample", "")


# Native frames of a timed sleep (time.sleep): a thread there wakes up by itself, so a setting
# stopped at the limit while in one is slow, not provably hung.
_TIMED_SLEEP = re.compile(r"^(time_sleep|pysleep|clock_nanosleep|__clock_nanosleep\w*|nanosleep) \(")


def provably_stuck(setting: Setting) -> bool:
    """A setting that gave no batch within the limit is hung, not merely slow, only when its
    stuck thread shows a wait that does not end by itself: blocked in I/O, or idle in a Python
    wait (a lock, an Event, a queue) other than a timed sleep. A thread that computes, sleeps a set
    time or was never found (workers still starting) is only out of time."""
    thread = setting.thread
    if not thread:
        return False
    if thread.get("io_wait"):
        return True
    if thread.get("state") != "idle" or _sleeping(setting):
        return False
    return bool(thread.get("python_frames"))


def judge(settings: List[Setting], batches: int):
    """(status, summary, findings) from the settings that ran, workers first."""
    for setting in settings:
        if setting.status == "hang" and not provably_stuck(setting):
            setting.status = "slow"  # out of time without a sign of a hang: not a verdict
    workers = next((s for s in settings if s.num_workers > 0), None)
    zero = next((s for s in settings if s.num_workers == 0), None)
    findings: List[Finding] = []

    if workers and workers.status == "crash":
        msg = f"a DataLoader worker crashed with num_workers={workers.num_workers}: {workers.error}"
        if workers.context:
            msg += f" ({workers.context})"
        findings.append(Finding("fail", msg[:500], "dataloader"))
        if zero and zero.status == "crash":
            findings.append(
                Finding("fail", f"num_workers=0 crashes too ({zero.error}): the sample itself crashes", "bad-sample")
            )
        elif zero and zero.status == "ok":
            findings.append(Finding("info", f"num_workers=0 works ({zero.describe()})", "dataloader"))
        why = workers.context if workers.context and workers.context.startswith("worker ") else workers.error
        return "fail", f"worker crashed (num_workers={workers.num_workers}): {_short(why)}", findings

    if workers and workers.status == "hang" and zero and zero.status == "ok":
        msg = (
            f"workers hang (num_workers={workers.num_workers}: {workers.describe()}{_where(workers)}"
            f"{_io_note(workers)}), "
            f"num_workers=0 works ({zero.describe()}): try num_workers=0 to triage, DataLoader(timeout=60) to get "
            f"an error instead of a hang, multiprocessing_context='spawn'"
        )
        findings.append(Finding("fail", msg, "dataloader"))
        return (
            "fail",
            f"workers hang{_in_io_wait(workers)} (num_workers={workers.num_workers}), num_workers=0 works",
            findings,
        )

    hung = [s for s in (zero, workers) if s is not None and s.status == "hang"]
    if zero is not None and zero.status == "hang":
        # Hangs without workers too: the dataset itself blocks. Judge from the main process when
        # it was the one fetching, else from the stuck worker.
        basis = zero if zero is not None and zero.thread else hung[0]
        cause, why = _hang_cause(basis)
        if workers is not None and workers.status == "hang":
            which = f"num_workers={workers.num_workers} and num_workers=0"
        else:
            which = "num_workers=0"
        kind = "an I/O wait" if cause == "io-stall" else "the dataset code (not I/O)"
        msg = f"fetching hangs with {which}: stuck in {kind}{_where(basis)}{why}"
        findings.append(Finding("fail", msg, cause))
        for s in hung:
            if s is not basis and _where(s):
                findings.append(Finding("info", f"num_workers={s.num_workers}: {s.describe()}{_where(s)}", cause))
        return "fail", f"fetching hangs with {which}: {'io-stall' if cause == 'io-stall' else 'bad sample'}", findings

    if zero and zero.status == "crash":
        msg = f"num_workers=0 crashes: {zero.error}: the sample itself crashes the process"
        findings.append(Finding("fail", msg, "bad-sample"))
        return "fail", f"num_workers=0 crashes: {_short(zero.error)}", findings

    errored = [s for s in settings if s.status == "error"]
    if errored:
        s = errored[0]
        where = f" at {s.where}" if s.where else ""
        msg = f"fetching a sample raised {s.error}{where} (num_workers={s.num_workers})"
        findings.append(Finding("fail", msg[:600], "bad-sample"))
        return "fail", f"a sample raised {_short(s.error)}", findings

    if workers and workers.status == "hang":  # workers hang; num_workers=0 did not run
        msg = (
            f"workers hang (num_workers={workers.num_workers}: {workers.describe()}{_where(workers)}"
            f"{_io_note(workers)})"
        )
        findings.append(Finding("fail", msg, "dataloader"))
        return (
            "fail",
            f"workers hang{_in_io_wait(workers)} (num_workers={workers.num_workers}); num_workers=0 not tried (time)",
            findings,
        )

    slow = [s for s in settings if s.status == "slow"]
    if slow:
        return _out_of_time(settings, slow)
    ok = [s for s in settings if s.status == "ok"]
    if not ok:
        return "fail", "no setting delivered batches", findings
    for s in ok:
        if s.first_batch is not None and s.first_batch > SLOW_FIRST_BATCH_S:
            findings.append(
                Finding(
                    "warn",
                    f"slow first batch with num_workers={s.num_workers}: {s.first_batch:.1f} s "
                    f"(workers starting, dataset setup, or slow reads)",
                    "dataloader",
                )
            )
    parts = [f"num_workers={s.num_workers}: {s.describe()}" for s in ok]
    if findings:
        return "warn", "slow first batch; " + "; ".join(parts), findings
    return "ok", f"{batches} batch(es) fetched; " + "; ".join(parts), findings


def _io_note(setting: Setting) -> str:
    """`; blocked in I/O: kernel wait channel pipe_read`, when the stuck thread shows an I/O wait."""
    io = setting.thread.get("io_wait")
    return f"; blocked in I/O: {io}" if io else ""


def _in_io_wait(setting: Setting) -> str:
    """` in an I/O wait (kernel wait channel pipe_read)`, for a summary, when there is one."""
    io = setting.thread.get("io_wait")
    return f" in an I/O wait ({io})" if io else ""


def _out_of_time(settings: List[Setting], slow: List[Setting]):
    """The limit came first and nothing showed a hang: the `timeout` status, with what was seen."""
    seen = []
    for s in settings:
        if s.status == "ok":
            seen.append(f"num_workers={s.num_workers}: {s.describe()}")
    findings = []
    for s in slow:
        where = _where(s) or " (no thread of it was found fetching: still starting?)"
        doing = "sleeping a set time" if _sleeping(s) else "running, not blocked"
        findings.append(
            Finding(
                "info",
                f"num_workers={s.num_workers}: {s.batches} batch(es), then none within "
                f"{s.hang_after or 0:.0f} s{where}; {doing}: slow, not shown to hang "
                "(rerun with a longer --timeout)",
            )
        )
    which = ", ".join(f"num_workers={s.num_workers}" for s in slow)
    summary = f"out of time before a verdict: {which} gave no batch within the limit, with no sign of a hang"
    if seen:
        summary += "; " + "; ".join(seen)
    return "timeout", summary, findings


def _sleeping(setting: Setting) -> bool:
    return any(_TIMED_SLEEP.match(frame) for frame in setting.thread.get("frames") or [])


def _short(text: Optional[str]) -> str:
    return (text or "?").splitlines()[0][:200]
