"""Python stacks of live processes, read from outside with py-spy (or pystack), every call bounded.

A hung job is often a process that does not answer: stopped (state T), stuck in uninterruptible
I/O (state D), or traced by a debugger. Each external tool therefore runs as a child process under
`run_command`, which kills it at the bound, so a stack dump can fail but never hang the caller.

One dump is a photo; a hang is a stack that does not move, so `sample_stacks` takes a few dumps
of every process in parallel and `StackSeries.thread_motion` says which threads are frozen.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Optional

from debug_stuck.bounded import CallTimedOut, call_with_timeout, run_command
from debug_stuck.core.dumptext import short_path
from debug_stuck.interpreter import isolated_python_code

MAX_THREADS = 256
MAX_FRAMES = 200
# "Failed to find python version" also means "interpreter not loaded yet" for a process that has
# only just been exec'd (or is still in a pyenv/conda shim), so it earns one retry after this.
NOT_PYTHON_RETRY_DELAY = 0.3
# /proc reads of a healthy process take microseconds; this only guards against a wedged kernel.
PROC_READ_SECONDS = 1.0

STACK_ERROR_KINDS = ("gone", "permission", "not-python", "timeout", "missing-tool", "failed")
_FATAL_KINDS = ("gone", "permission", "not-python", "timeout")


class StackError(Exception):
    """Why the stacks of a process could not be read; `kind` is one of STACK_ERROR_KINDS."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class Frame:
    function: str
    file: str
    line: Optional[int]
    native: bool = False
    path: Optional[str] = None  # the full file name, where `file` is shortened (py-spy's short_filename)
    module: Optional[str] = None  # a native frame's shared object, where `file` is its C source (py-spy's module)

    @property
    def bare_name(self) -> str:
        # C symbols carry dots of their own (".constprop.0", ".isra"), not a class qualifier.
        if self.native:
            return self.function
        return self.function.rsplit(".", 1)[-1]

    def to_dict(self) -> dict:
        out: dict = {"function": self.function, "file": self.file, "line": self.line}
        if self.native:
            out["native"] = True
        if self.path and self.path != self.file:
            out["path"] = self.path
        if self.module and self.module not in (self.file, self.path):
            out["module"] = self.module
        return out

    @property
    def shown_name(self) -> str:
        """The name as a report prints it: a long native name (a C++ template, a Rust symbol the
        stack tool left mangled) shortened to the words that say what it is (readable_symbol)."""
        return readable_symbol(self.bare_name) if self.native else self.bare_name

    def text(self) -> str:
        if self.native or self.line is None:
            return f"{self.bare_name} ({self.file})"
        return f"{self.bare_name} ({self.file}:{self.line})"

    def shown_text(self) -> str:
        """text() as a report prints it (frame tables and signals match text(), the name as sampled)."""
        return f"{self.shown_name} ({self.file})" if self.native else self.text()


MANGLED_MAX = 80
RUST_IDENT = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]{4,}")


def readable_symbol(name: str) -> str:
    """A long native name shortened to what says what it is: a C++ name's template arguments folded
    (`c10::function_ref<…>::callback_fn<…>`); a Rust v0 (`_R...`) or legacy (`_ZN...`) symbol left
    mangled read by its length-prefixed identifiers, the last snake_case one kept ("<mangled Rust
    symbol, 442 characters, in tokenize_with_cache>"). A short name is returned as it is."""
    if len(name) <= MANGLED_MAX:
        return name
    if "<" in name and "::" in name:
        return _fold_templates(name)
    if not name.startswith(("_R", "_ZN")) or "::" in name:
        return name
    words, i = [], 0
    while i < len(name):
        digits = re.match(r"\d+", name[i:])
        if digits is None:
            i += 1
            continue
        i += len(digits.group())
        size = int(digits.group())
        if i < len(name) and name[i] == "_":
            i += 1
        word = name[i : i + size]
        if size and RUST_IDENT.fullmatch(word):
            words.append(word)
            i += size
    kept = [w for w in words if "_" in w][-1:] or words[-1:]
    return f"<mangled Rust symbol, {len(name)} characters, in {kept[0]}>" if kept else name[:MANGLED_MAX] + "..."


def _fold_templates(name: str) -> str:
    """`a<b<c>, d>::e<f>` -> `a<…>::e<…>`: every outermost template argument list folded."""
    out, depth = [], 0
    for char in name:
        if char == "<":
            depth += 1
            if depth == 1:
                out.append("<…>")
        elif char == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out)


@dataclass
class ThreadStack:
    tid: int
    name: str
    state: str
    frames: list[Frame] = field(default_factory=list)
    # The tool read this thread as the GIL's owner (py-spy's owns_gil, pystack's gil). Idle and
    # holding it, the thread blocks every other Python thread of its process.
    holds_gil: bool = False

    def to_dict(self) -> dict:
        out = {
            "tid": self.tid,
            "name": self.name,
            "state": self.state,
            "frames": [frame.to_dict() for frame in self.frames],
        }
        if self.holds_gil:
            out["holds_gil"] = True
        return out

    def signature(self, lines: bool = False) -> tuple:
        # Native frames are left out: their presence depends on the tool and on whether unwinding
        # worked, which would make the same stack look different from one sample to the next.
        if lines:
            return tuple((f.bare_name, f.file, f.line) for f in self.frames if not f.native)
        return tuple((f.bare_name, f.file) for f in self.frames if not f.native)


@dataclass
class StackDump:
    pid: int
    threads: list[ThreadStack]
    tool: str
    seconds: float
    error: Optional[str] = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "pid": self.pid,
            "tool": self.tool,
            "seconds": round(self.seconds, 3),
            "threads": [thread.to_dict() for thread in self.threads],
            "error": self.error,
            "notes": list(self.notes),
        }


@dataclass
class StackSeries:
    pid: int
    dumps: list[StackDump] = field(default_factory=list)
    error: Optional[str] = None
    error_kind: Optional[str] = None

    def latest(self) -> Optional[StackDump]:
        return self.dumps[-1] if self.dumps else None

    def thread_motion(self) -> dict[int, str]:
        seen: dict = {}
        for dump in self.dumps:
            for thread in dump.threads:
                seen.setdefault(thread.tid, []).append(thread.signature(lines=True))
        motion = {}
        for tid, signatures in seen.items():
            if len(signatures) < 2:
                motion[tid] = "unknown"
            elif all(sig == signatures[0] for sig in signatures):
                motion[tid] = "frozen"
            else:
                motion[tid] = "moving"
        return motion

    def frozen(self) -> Optional[bool]:
        if len(self.dumps) < 2:
            return None
        judged = [m for m in self.thread_motion().values() if m != "unknown"]
        if not judged:
            return None
        return all(m == "frozen" for m in judged)


# --- /proc --------------------------------------------------------------------------------------


@dataclass
class _ProcInfo:
    pid: int
    exists: bool
    state: Optional[str] = None
    comm: str = "?"
    tracer: int = 0


def _read_proc(pid: int) -> _ProcInfo:
    def read() -> _ProcInfo:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except (FileNotFoundError, ProcessLookupError):
            return _ProcInfo(pid, exists=False)
        # comm may itself contain spaces and parentheses; it ends at the last ")".
        left, right = stat.find("("), stat.rfind(")")
        comm = stat[left + 1 : right] if 0 <= left < right else "?"
        fields = stat[right + 2 :].split()
        info = _ProcInfo(pid, exists=True, state=fields[0] if fields else None, comm=comm)
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("TracerPid:"):
                        info.tracer = int(line.split()[1])
                        break
        except (OSError, ValueError, IndexError):
            pass
        return info

    try:
        return call_with_timeout(read, PROC_READ_SECONDS, f"read /proc/{pid}/stat")
    except (CallTimedOut, OSError):
        # Unknown is safer than "gone": let the stack tool have its say.
        return _ProcInfo(pid, exists=True)


# Kernel waits of a write that may be part-way done: fs/pipe.c (pipe_write; anon_pipe_write since
# Linux 6.x), net/core/stream.c (sk_stream_wait_memory), net/core/sock.c (sock_alloc_send_pskb ->
# sock_wait_for_wmem), drivers/tty/n_tty.c (n_tty_write). A ptrace attach (py-spy's pause, pystack)
# or a SIGSTOP makes such a write(2) return the bytes it wrote so far (pipe(7), signal(7): "if the
# call was interrupted after some data was transferred, it returns a short count"), and CPython's
# buffered writer then loses the rest (measured: 65536 of 1000000 bytes reach the reader).
PARTIAL_WRITE_WAITS = frozenset(
    {
        "pipe_write",
        "anon_pipe_write",
        "sk_stream_wait_memory",
        "sock_alloc_send_pskb",
        "sock_wait_for_wmem",
        "n_tty_write",
    }
)
MAX_TASKS_CHECKED = 512


def _writing_threads(pid: int) -> list:
    """The threads of pid blocked part-way through a write, which a pause would cut short."""

    def read() -> list:
        out = []
        for name in sorted(os.listdir(f"/proc/{pid}/task"))[:MAX_TASKS_CHECKED]:
            try:
                with open(f"/proc/{pid}/task/{name}/wchan") as fh:
                    if fh.read().strip() in PARTIAL_WRITE_WAITS:
                        out.append(int(name))
            except (OSError, ValueError):
                continue
        return out

    try:
        return call_with_timeout(read, PROC_READ_SECONDS, f"read the wchan of {pid}'s threads")
    except (CallTimedOut, OSError):
        return []


def _ptrace_scope() -> Optional[str]:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _gone(pid: int, info: Optional[_ProcInfo] = None) -> StackError:
    if info is not None and info.state == "Z":
        return StackError("gone", f"process {pid} has exited (zombie, not yet reaped by its parent)")
    return StackError("gone", f"process {pid} does not exist (it may have exited)")


def _permission(pid: int) -> StackError:
    scope = _ptrace_scope()
    hint = "run as root, or give py-spy CAP_SYS_PTRACE (containers: --cap-add SYS_PTRACE)"
    if scope is not None:
        hint += f"; /proc/sys/kernel/yama/ptrace_scope is {scope}"
    return StackError("permission", f"not allowed to read the stacks of process {pid}: {hint}")


def _not_python(pid: int, info: _ProcInfo) -> StackError:
    return StackError(
        "not-python", f"process {pid} ({info.comm}) is not a Python process; debug-stuck reads Python stacks"
    )


def _timed_out(pid: int, tool: str, seconds: float) -> StackError:
    info = _read_proc(pid)
    now = f" (it is in state {info.state} now)" if info.state else ""
    return StackError(
        "timeout",
        f"{tool} did not answer within {seconds:g}s for process {pid}{now}; the process may be stopped"
        " (state T) or in uninterruptible I/O (state D)",
    )


def _stopped_note(info: _ProcInfo) -> Optional[str]:
    if info.state == "T":
        return f"process {info.pid} is stopped (state T: SIGSTOP or Ctrl-Z); kill -CONT {info.pid} resumes it"
    if info.state == "t":
        tracer = f" (TracerPid {info.tracer})" if info.tracer else ""
        return f"process {info.pid} is held by a debugger{tracer}; it runs again when the debugger detaches"
    return None


# --- py-spy -------------------------------------------------------------------------------------


def _find_py_spy() -> Optional[str]:
    # The py-spy installed with this package sits beside the interpreter; prefer it to a PATH entry
    # such as a pyenv shim, which is a shell script that costs a fork or two per dump.
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    return shutil.which("py-spy")


def _summarize_stderr(stderr: str) -> str:
    """py-spy's anyhow report ("Error: X / Caused by: 0: Y") as one line: "X: Y"."""
    parts: list = []
    for raw in stderr.splitlines():
        line = raw.strip()
        if not line or line == "Caused by:":
            continue
        if line.startswith("Stack backtrace:"):
            break
        line = re.sub(r"^(Error:\s*|\d+:\s+)", "", line)
        if line and line not in parts:
            parts.append(line)
    return ": ".join(parts)[:400] or "no error text"


def _classify_pyspy(pid: int, text: str) -> tuple:
    info = _read_proc(pid)
    if not info.exists or info.state == "Z":
        return "gone", _gone(pid, info)
    lowered = text.lower()
    if "permission denied" in lowered or "operation not permitted" in lowered or "eperm" in lowered:
        return "permission", _permission(pid)
    if "failed to find python version" in lowered or "failed to get process executable name" in lowered:
        # The second one, for a process that still exists, is a kernel thread: it has no executable.
        return "not-python", _not_python(pid, info)
    if "no such process" in lowered or "esrch" in lowered:
        return "gone", _gone(pid, info)
    return "failed", StackError("failed", f"py-spy failed on process {pid}: {text}")


def _short_path(path: str) -> str:
    """A package-relative path like py-spy's short_filename, for tools that only give full paths."""
    return short_path(path, basename=True)


def _thread_state(active: bool, owns_gil: bool) -> str:
    if not active:
        return "idle"
    return "gil" if owns_gil else "active"


def _cap_threads(threads: list, notes: list) -> list:
    if len(threads) > MAX_THREADS:
        notes.append(f"{len(threads)} threads; kept the first {MAX_THREADS}")
        threads = threads[:MAX_THREADS]
    clipped = 0
    for thread in threads:
        if len(thread.frames) > MAX_FRAMES:
            # Keep the innermost frames: that is where a thread waits.
            thread.frames = thread.frames[:MAX_FRAMES]
            clipped += 1
    if clipped:
        notes.append(f"{clipped} thread(s) deeper than {MAX_FRAMES} frames; kept the innermost {MAX_FRAMES}")
    return threads


# py-spy --native on Python 3.11+ gives the interpreter's entry shims where C code calls back into
# Python as frames named by a bare address, with no file ("0x7ffe889a0d00 (?)", is_shim_entry): they
# name nothing, and their addresses differ from one dump to the next, so they are left out.
_UNNAMED_FRAME = re.compile(r"0x[0-9a-fA-F]+")


def _parse_pyspy_json(text: str) -> list:
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("expected a JSON list of threads")
    threads = []
    for item in data:
        frames = []
        for raw in item.get("frames") or []:
            if raw.get("filename") in (None, "?") and _UNNAMED_FRAME.fullmatch(str(raw.get("name") or "")):
                continue
            # py-spy names the shared object in "module" only for native frames.
            native = raw.get("module") is not None
            line = raw.get("line")
            frames.append(
                Frame(
                    function=str(raw.get("name") or "?"),
                    file=str(raw.get("short_filename") or raw.get("filename") or "?"),
                    line=line if isinstance(line, int) and line > 0 else None,
                    native=native,
                    path=str(raw["filename"]) if raw.get("filename") else None,
                    module=str(raw["module"]) if native and raw.get("module") else None,
                )
            )
        tid = item.get("os_thread_id")
        if not isinstance(tid, int):
            tid = item.get("thread_id") or 0
        threads.append(
            ThreadStack(
                tid=int(tid),
                name=str(item.get("thread_name") or ""),
                state=_thread_state(bool(item.get("active")), bool(item.get("owns_gil"))),
                frames=frames,
                holds_gil=bool(item.get("owns_gil")),
            )
        )
    return threads


def _py_spy_env() -> dict:
    env = dict(os.environ)
    # A Rust backtrace on every error costs time and buries the one line we report.
    env["RUST_BACKTRACE"] = "0"
    env["RUST_LIB_BACKTRACE"] = "0"
    return env


def _pyspy_threads(
    exe: str, pid: int, native: bool, nonblocking: bool, deadline: float, budget: float, notes: list
) -> list:
    tool = "py-spy --native" if native else "py-spy"
    retried_version = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0.05:
            raise _timed_out(pid, tool, budget)
        argv = [exe, "dump", "--pid", str(pid), "--json"]
        if native:
            argv.append("--native")
        if nonblocking:
            argv.append("--nonblocking")
        result = run_command(argv, remaining, env=_py_spy_env())
        if result.timed_out:
            raise _timed_out(pid, tool, budget)
        if result.returncode == 0:
            try:
                return _parse_pyspy_json(result.stdout)
            except (ValueError, TypeError, AttributeError) as exc:
                raise StackError("failed", f"{tool} printed output that is not a stack dump ({exc})") from None
        text = _summarize_stderr(result.stderr or result.stdout)
        if "failed to suspend process" in text.lower() and not nonblocking and not native:
            # The process got stopped, or a debugger attached, between our /proc read and py-spy's
            # attach: read it without pausing, as for a process that was stopped from the start.
            nonblocking = True
            notes.append(_stopped_note(_read_proc(pid)) or f"py-spy could not pause the process ({text})")
            continue
        if "failed to suspend process" in text.lower():
            info = _read_proc(pid)
            if not info.exists or info.state == "Z":
                raise _gone(pid, info)
            # Not a permission problem even when the cause reads EPERM: another tracer holds the
            # process. Native unwinding needs the pause, so the caller falls back to other tools.
            raise StackError("failed", f"{tool} could not pause process {pid}: {text}")
        kind, error = _classify_pyspy(pid, text)
        if kind == "not-python" and not retried_version and "python version" in text.lower():
            retried_version = True
            time.sleep(min(NOT_PYTHON_RETRY_DELAY, max(0.0, deadline - time.monotonic() - 0.1)))
            continue
        if kind == "failed":
            error = StackError("failed", f"{tool} failed on process {pid}: {text}")
        raise error


def frame_arguments(pid: int, function: str, file_end: str, timeout: float = 2.0) -> dict:
    """The arguments of pid's frame `function` in a file whose name ends with `file_end`, as py-spy
    --locals prints each (its repr), or {} when it cannot tell. Every other local of every frame is
    dropped unread: they hold the job's data, secrets included. Bounded; a process with a write
    part-way done, or stopped, is read without a pause (see PARTIAL_WRITE_WAITS)."""
    exe = _find_py_spy()
    if exe is None:
        return {}
    argv = [exe, "dump", "--pid", str(pid), "--json", "--locals"]
    if _stopped_note(_read_proc(pid)) is not None or _writing_threads(pid):
        argv.append("--nonblocking")  # as dump_stacks reads it: py-spy cannot pause these, or must not
    result = run_command(argv, timeout, env=_py_spy_env())
    if result.timed_out or result.returncode != 0:
        return {}
    try:
        threads = json.loads(result.stdout)
        for thread in threads:
            for frame in thread.get("frames") or []:
                name = str(frame.get("filename") or "").replace("\\", "/")
                if frame.get("name") == function and name.endswith(file_end):
                    return {str(v.get("name")): str(v.get("repr")) for v in frame.get("locals") or [] if v.get("arg")}
    except (ValueError, TypeError, AttributeError):
        return {}
    return {}


# --- pystack ------------------------------------------------------------------------------------

# Runs in a child interpreter: a ptrace attach that never returns then blocks a process we can kill,
# not us. It mirrors pystack's own traceback formatter to interleave native and Python frames.
_PYSTACK_SCRIPT = r"""
import json, sys
pid, native, pause = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3:4] != ["0"]
try:
    from pystack.engine import NativeReportingMode, get_process_threads
    from pystack.types import NativeFrame, frame_type
except ImportError as exc:
    print(json.dumps({"error": "missing", "message": str(exc)}))
    sys.exit(0)

def pyframe(f):
    return {"function": f.code.scope, "file": f.code.filename, "line": f.code.location.lineno, "native": False}

def proc_state(tid):
    try:
        with open("/proc/%d/task/%d/stat" % (pid, tid)) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except Exception:
        return "?"

def frames_of(t):
    python = [f for f in t.all_frames]
    eval_kind = NativeFrame.FrameType.EVAL
    kinds = [frame_type(n, t.python_version) for n in t.native_frames] if native else []
    entries = sum(1 for f in python if f.is_entry)
    if not native or not t.native_frames or kinds.count(eval_kind) != entries:
        return [pyframe(f) for f in python if not f.is_shim], bool(native and t.native_frames)
    out, i = [], 0
    while i < len(python) and python[i].is_shim:
        i += 1
    for n, kind in zip(t.native_frames, kinds):
        if kind == eval_kind:
            if i < len(python):
                out.append(pyframe(python[i]))
                i += 1
            while i < len(python) and not python[i].is_entry:
                if not python[i].is_shim:
                    out.append(pyframe(python[i]))
                i += 1
        elif kind == NativeFrame.FrameType.OTHER:
            out.append({"function": n.symbol, "file": n.library or n.path, "line": None, "native": True})
    return out, False

try:
    mode = NativeReportingMode.ALL if native else NativeReportingMode.OFF
    threads = list(get_process_threads(pid, stop_process=pause, native_mode=mode))
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
    sys.exit(0)
result, unmerged = [], 0
for t in threads:
    frames, failed = frames_of(t)
    unmerged += failed
    frames.reverse()
    gil = t.holds_the_gil > 0
    result.append({"tid": t.tid, "name": t.name or "", "gil": gil, "os_state": proc_state(t.tid), "frames": frames})
print(json.dumps({"threads": result, "unmerged": unmerged}))
"""


def _pystack_threads(pid: int, native: bool, deadline: float, budget: float, notes: list, pause: bool = True) -> list:
    remaining = deadline - time.monotonic()
    if remaining <= 0.05:
        raise _timed_out(pid, "pystack", budget)
    # pystack pauses the process with ptrace; that works for a process in state T too (unlike
    # reading it without a pause, which fails to unwind native frames), so it always pauses.
    argv = [*isolated_python_code(_PYSTACK_SCRIPT), str(pid), "1" if native else "0", "1" if pause else "0"]
    try:
        result = run_command(argv, remaining)
    except OSError as exc:
        raise StackError("missing-tool", f"could not start {sys.executable} to run pystack: {exc}") from None
    if result.timed_out:
        raise _timed_out(pid, "pystack", budget)
    try:
        data = json.loads(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict) or ("threads" not in data and "error" not in data):
        text = _summarize_stderr(result.stderr) if result.stderr else f"exit status {result.returncode}"
        raise StackError("failed", f"pystack failed on process {pid}: {text}")
    if "error" in data:
        message = str(data.get("message") or data["error"])
        if data["error"] == "missing":
            raise StackError("missing-tool", "pystack is not installed (pip install pystack)")
        info = _read_proc(pid)
        lowered = message.lower()
        if not info.exists or info.state == "Z":
            raise _gone(pid, info)
        if info.tracer:
            # A process has one tracer at a time; EPERM here means "busy", not "forbidden".
            raise StackError("failed", f"pystack could not attach: process {pid} is traced by pid {info.tracer}")
        if "permission" in lowered or "operation not permitted" in lowered:
            raise _permission(pid)
        if "python version" in lowered or "not a python" in lowered:
            raise _not_python(pid, info)
        raise StackError("failed", f"pystack failed on process {pid}: {message}"[:400])
    if data.get("unmerged"):
        notes.append(f"pystack could not merge native frames for {data['unmerged']} thread(s); Python frames only")
    threads = []
    for item in data["threads"]:
        frames = []
        for raw in item.get("frames") or []:
            is_native = bool(raw.get("native"))
            path = str(raw.get("file") or "?")
            frames.append(
                Frame(
                    function=str(raw.get("function") or "?"),
                    file=os.path.basename(path) if is_native else _short_path(path),
                    line=raw.get("line") if isinstance(raw.get("line"), int) and raw.get("line") > 0 else None,
                    native=is_native,
                    path=None if is_native else path,
                )
            )
        # pystack has no "active" flag; the kernel's run state stands in for it.
        active = item.get("os_state") == "R" or bool(item.get("gil"))
        threads.append(
            ThreadStack(
                tid=int(item.get("tid") or 0),
                name=str(item.get("name") or ""),
                state=_thread_state(active, bool(item.get("gil"))),
                frames=frames,
                holds_gil=bool(item.get("gil")),
            )
        )
    return threads


# --- public API ---------------------------------------------------------------------------------


def dump_stacks(pid: int, native: bool = False, timeout: float = 5.0) -> StackDump:
    """Every thread's stack of one process, within `timeout` seconds in all; raises StackError."""
    started = time.monotonic()
    deadline = started + timeout
    notes: list = []
    info = _read_proc(pid)
    if not info.exists or info.state == "Z":
        raise _gone(pid, info)
    stopped = _stopped_note(info)
    if stopped:
        notes.append(stopped)

    def finish(threads: list, tool: str) -> StackDump:
        threads = _cap_threads(threads, notes)
        return StackDump(pid=pid, threads=threads, tool=tool, seconds=time.monotonic() - started, notes=notes)

    writing = [] if stopped else _writing_threads(pid)
    if writing:
        # Read without a pause: native frames need one, so they are given up for this process.
        native = False
        notes.append(
            f"process {pid} was read without pausing it: thread {writing[0]} is part-way through a write to a "
            "full pipe, socket or terminal, and a pause would cut that write short; native frames not read"
        )
    exe = _find_py_spy()
    if exe is None:
        try:
            return finish(_pystack_threads(pid, native, deadline, timeout, notes, pause=not writing), "pystack")
        except StackError as exc:
            if exc.kind == "missing-tool":
                raise StackError("missing-tool", "py-spy is not installed: pip install py-spy") from None
            raise

    # py-spy cannot unwind native frames without pausing the process, and cannot pause one that is
    # stopped or traced; pystack can.
    nonblocking = stopped is not None or bool(writing)
    if native:
        if not nonblocking:
            try:
                return finish(_pyspy_threads(exe, pid, True, False, deadline, timeout, notes), "py-spy --native")
            except StackError as exc:
                if exc.kind in _FATAL_KINDS:
                    raise
                notes.append(f"py-spy --native failed ({exc.message})")
        try:
            return finish(_pystack_threads(pid, True, deadline, timeout, notes), "pystack")
        except StackError as exc:
            if exc.kind in ("gone", "timeout"):
                raise
            notes.append(f"pystack native failed ({exc.message})")
        notes.append("native frames unavailable; Python frames only")
        return finish(_pyspy_threads(exe, pid, False, nonblocking, deadline, timeout, notes), "py-spy")

    try:
        return finish(_pyspy_threads(exe, pid, False, nonblocking, deadline, timeout, notes), "py-spy")
    except StackError as exc:
        if exc.kind != "failed":
            raise
        # An error py-spy does not explain (a new CPython layout, say): pystack is a second opinion.
        try:
            threads = _pystack_threads(pid, False, deadline, timeout, notes, pause=not writing)
        except StackError:
            raise exc from None
        notes.append(f"py-spy failed ({exc.message}); stacks from pystack")
        return finish(threads, "pystack")


def sample_stacks(
    pids: list,
    samples: int = 2,
    interval: float = 1.0,
    native: bool = False,
    timeout: float = 5.0,
    max_workers: int = 8,
) -> dict[int, StackSeries]:
    """`samples` rounds of dumps, `interval` seconds apart, every process of a round in parallel.

    Never raises for a process: a process that cannot be read, or exits part way, gets its error
    in the series and keeps the samples taken before it.

    `native`: unwinding native frames costs ~0.5 s of CPU per large (libtorch) process, so with
    several rounds the earlier ones are Python-only and the last one unwinds natively one process
    per distinct stack (8 ranks waiting in the same all_reduce need one native unwind, not 8); a
    job of up to UNWIND_ALL_UP_TO processes has each unwound.
    Motion is judged on Python frames only, so mixing is sound.
    """
    unique = list(dict.fromkeys(int(p) for p in pids))
    series = {pid: StackSeries(pid=pid) for pid in unique}
    if not unique or samples < 1:
        return series
    # Kinds that another round cannot fix; a timeout counts, as waiting again would double the cost.
    done: set = set()
    workers = max(1, min(max_workers, len(unique)))
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="stacks") as pool:
        for round_index in range(samples):
            wait = start + round_index * interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            todo = [pid for pid in unique if pid not in done]
            if not todo:
                break
            if native and samples > 1:
                unwind = _one_per_stack(series, todo) if round_index == samples - 1 else set()
            else:
                unwind = set(todo) if native else set()
            futures = {pid: pool.submit(_safe_dump, pid, pid in unwind, timeout) for pid in todo}
            for pid, future in futures.items():
                result = future.result()
                entry = series[pid]
                if isinstance(result, StackDump):
                    entry.dumps.append(result)
                    continue
                taken = len(entry.dumps)
                where = f" (after {taken} of {samples} samples)" if taken else ""
                entry.error = f"{result.message}{where}"
                entry.error_kind = result.kind
                if result.kind in _FATAL_KINDS or result.kind == "missing-tool":
                    done.add(pid)
    return series


# Up to this many processes are all unwound: two ranks at one line can wait in different native
# calls (rank 0's isend and rank 1's irecv both in `req.wait()`: gloo's SendWork and RecvWork).
UNWIND_ALL_UP_TO = 4


def _one_per_stack(series: dict, pids: list) -> set:
    """One pid per distinct main-thread Python stack of the samples so far (and every pid that has
    no sample yet): the processes worth a native unwind. A small job has each of its processes
    unwound."""
    if len(pids) <= UNWIND_ALL_UP_TO:
        return set(pids)
    chosen, seen = set(), set()
    for pid in pids:
        latest = series[pid].latest()
        if latest is None or not latest.threads:
            chosen.add(pid)
            continue
        main = next((t for t in latest.threads if t.tid == pid), latest.threads[0])
        # lines count: a forked child runs the parent's own code at another line (os.fork), and
        # only its native frames say what it waits on
        key = main.signature(lines=True)
        if key not in seen:
            seen.add(key)
            chosen.add(pid)
    return chosen


def _safe_dump(pid: int, native: bool, timeout: float):
    try:
        return dump_stacks(pid, native=native, timeout=timeout)
    except StackError as exc:
        return exc
    except Exception as exc:  # a probe reports what it could not collect; it does not crash the report
        return StackError("failed", f"reading the stacks of process {pid} failed: {type(exc).__name__}: {exc}")


def main_thread(dump, pid: int):
    """The thread whose tid is the pid (py-spy's main thread), else the first one."""
    if dump is None or not dump.threads:
        return None
    return next((t for t in dump.threads if t.tid == pid), dump.threads[0])
