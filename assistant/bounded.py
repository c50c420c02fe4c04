"""Hard time bounds for calls that may never return on a machine that is already in trouble."""

from __future__ import annotations

import contextvars
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


class CallTimedOut(Exception):
    """The call did not finish within its bound; it may still be running in a daemon thread."""

    def __init__(self, what: str, seconds: float):
        super().__init__(f"{what} did not finish within {seconds:g} s")
        self.what = what
        self.seconds = seconds


def call_with_timeout(fn: Callable[[], T], seconds: float, what: str = "call") -> T:
    """Run fn in a daemon thread and wait at most `seconds` for it.

    A read from a dead NFS mount or a wedged driver cannot be interrupted from Python; running it
    in a daemon thread lets us give up on it and still write a report.
    """
    box: dict = {}
    context = contextvars.copy_context()  # the caller's context variables hold in the thread too

    def runner() -> None:
        try:
            box["value"] = context.run(fn)
        except BaseException as exc:  # handed back to the caller below
            box["error"] = exc

    thread = threading.Thread(target=runner, name=f"bounded:{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise CallTimedOut(what, seconds)
    if "error" in box:
        raise box["error"]
    return box["value"]


def call_or(default: T, fn: Callable[[], T], seconds: float, what: str, catch: tuple = (OSError, ValueError)) -> T:
    """call_with_timeout, where running out of time or raising one of `catch` gives `default`."""
    try:
        return call_with_timeout(fn, seconds, what)
    except (CallTimedOut, *catch):
        return default


@dataclass
class CommandResult:
    argv: Sequence[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


def kill_process_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_command(
    argv: Sequence[str],
    timeout: float,
    env: dict | None = None,
    cwd: str | None = None,
    input_text: str | None = None,
) -> CommandResult:
    """Run a command in its own process group; at the bound, kill the whole group.

    Raises FileNotFoundError when the program does not exist, so callers can say what to install.
    """
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
        text=True,
        errors="replace",
    )
    with _owned_tree(proc.pid):
        try:
            out, err = proc.communicate(input=input_text, timeout=timeout)
            return CommandResult(argv, proc.returncode, out, err, False)
        except subprocess.TimeoutExpired:
            kill_process_group(proc.pid)
            try:
                # A child in uninterruptible sleep may not die at once; do not wait on it forever.
                out, err = proc.communicate(timeout=2)
            except subprocess.TimeoutExpired:
                out, err = "", ""
            return CommandResult(argv, None, out or "", err or "", True)
        except BaseException:
            kill_process_group(proc.pid)  # Ctrl-C or a signal turned into an exception: it ends with us
            raise


# --- whole process trees ------------------------------------------------------------------------

TREE_OUTPUT_BYTES = 2 << 20  # the tail of a run's output that is kept
_TREE_POLL = 0.2
_TREE_PARTIAL_LINE = 64 << 10  # a "line" longer than this is handed on in pieces
_TREE_KILL_SECONDS = 5.0


@dataclass
class TreeResult:
    argv: Sequence[str]
    returncode: int | None  # None when the run was killed at its bound
    output: str  # stdout and stderr interleaved, the last TREE_OUTPUT_BYTES of it
    timed_out: bool
    seconds: float
    dropped_bytes: int = 0  # output cut from the front to keep it bounded
    stopped_early: bool = False  # on_line asked to stop
    pids: list = field(default_factory=list)  # every process of the tree seen while it ran
    leftovers: list = field(default_factory=list)  # processes still alive after the kill (should be empty)

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


# --- what this process started, ended on every way out -----------------------------------------

_OWNED_LOCK = threading.Lock()
_OWNED_TREES: dict = {}  # root pid -> its members seen so far ({pid: create_time}), while run_tree runs
_OWNED_DIRS: set = set()  # scratch folders not yet removed


def scratch_dir(prefix: str) -> str:
    """A private temporary folder that `end_everything_started()` removes if we are cut short."""
    path = tempfile.mkdtemp(prefix=prefix)
    with _OWNED_LOCK:
        _OWNED_DIRS.add(path)
    return path


def remove_scratch(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with _OWNED_LOCK:
        _OWNED_DIRS.discard(path)


def keep_scratch(path: str) -> None:
    """The folder holds a result the report points at: it outlives us."""
    with _OWNED_LOCK:
        _OWNED_DIRS.discard(path)


def end_everything_started() -> tuple:
    """On the way out after a signal or Ctrl-C: kill every process tree a run_tree call still runs
    (the user's code in a probe, its workers, a launcher and its ranks) and remove every scratch
    folder. Returns (processes signalled, folders removed). Safe to call from the main thread while
    a worker thread is inside run_tree: that call sees its command die and returns."""
    with _OWNED_LOCK:
        trees = list(_OWNED_TREES.items())
        dirs = list(_OWNED_DIRS)
        _OWNED_DIRS.clear()
    ended = 0
    for root, known in trees:
        members = dict(known)
        _tree_members(root, members)
        ended += sum(1 for pid, created in members.items() if _same_process(pid, created) is not None)
        kill_tree(root, members)
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)
    return ended, len(dirs)


@contextmanager
def _owned_tree(root_pid: int):
    """While the block runs, the command's tree ({pid: create_time}, yielded for the caller to
    extend) is one `end_everything_started()` ends if we are cut short."""
    known = {root_pid: _proc_create_time(root_pid)}
    with _OWNED_LOCK:
        _OWNED_TREES[root_pid] = known
    try:
        yield known
    finally:
        with _OWNED_LOCK:
            _OWNED_TREES.pop(root_pid, None)


def wait_ended(pid: int, seconds: float) -> bool:
    """Wait up to `seconds` for process pid to end, without reaping it (a zombie has ended: its
    PID stays ours until its parent reaps it, so it cannot be reused under us)."""
    import psutil

    try:
        proc = psutil.Process(pid)
    except psutil.Error:
        return True
    return not _wait_dead([proc], seconds)


def members_of(root_pid: int, known: dict) -> dict:
    """root_pid and its live descendants, added to known ({pid: create_time}), which is returned."""
    known.setdefault(root_pid, _proc_create_time(root_pid))
    _tree_members(root_pid, known)
    return known


def _tree_members(root_pid: int, known: dict) -> None:
    """Add the live descendants of root_pid to known ({pid: create_time}); never raises."""
    import psutil

    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return
    for child in children:
        if child.pid in known:
            continue
        try:
            known[child.pid] = child.create_time()
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            pass


def _same_process(pid: int, create_time: float | None):
    """The psutil.Process for pid when it is still the one we saw (not a reused PID), else None."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > 0.01:
            return None
        return proc
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return None


def kill_tree(root_pid: int, known: dict | None = None, seconds: float = _TREE_KILL_SECONDS) -> list:
    """SIGKILL root_pid's process group, root_pid and every descendant; return the PIDs still alive.

    Launchers such as torchrun start their ranks in new sessions, so killing the group alone
    leaves them running. Processes are frozen with SIGSTOP from the top down first, so none can
    fork a child we have not listed while the others die; `known` ({pid: create_time}) adds
    descendants seen earlier that may have been re-parented since. A PID is only signalled while
    its create time still matches, so a recycled PID is left alone.
    """
    import psutil

    known = dict(known or {})
    root = _same_process(root_pid, known.get(root_pid))
    if root is not None:
        try:
            known.setdefault(root_pid, root.create_time())
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            pass

    def freeze_all() -> None:
        frozen: set = set()
        for _ in range(8):  # until a round finds nobody new; a frozen process cannot fork
            _tree_members(root_pid, known)
            for pid in list(known):
                if pid in frozen:
                    continue
                _tree_members(pid, known)
            fresh = [pid for pid in known if pid not in frozen]
            if not fresh:
                return
            # Parents before children (lower create time first): a parent frozen first cannot
            # replace a child we are about to stop.
            for pid in sorted(fresh, key=lambda p: known[p] or 0.0):
                proc = _same_process(pid, known[pid])
                if proc is not None:
                    try:
                        proc.send_signal(signal.SIGSTOP)
                    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
                        pass
                frozen.add(pid)

    try:
        call_with_timeout(freeze_all, seconds / 2, what="freeze process tree")
    except CallTimedOut:
        pass  # /proc did not answer; the group and the PIDs already known still get killed
    kill_process_group(root_pid)
    procs = []
    for pid, created in list(known.items()):
        proc = _same_process(pid, created)
        if proc is None:
            continue
        procs.append(proc)
        try:
            proc.send_signal(signal.SIGKILL)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            pass
    return _wait_dead(procs, seconds / 2)


def _wait_dead(procs: list, seconds: float) -> list:
    """PIDs of procs still alive after up to `seconds`. A zombie counts as dead: it is, and its
    parent (often our caller, through Popen) reaps it; waiting here must not reap anyone's child."""
    import time

    import psutil

    deadline = time.monotonic() + seconds
    alive = list(procs)
    delay = 0.005
    while alive:
        still = []
        for proc in alive:
            try:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    still.append(proc)
            except psutil.NoSuchProcess:
                pass
            except (psutil.AccessDenied, OSError):
                still.append(proc)
        alive = still
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    return [proc.pid for proc in alive]


def run_tree(
    argv: Sequence[str],
    timeout: float,
    env: dict | None = None,
    cwd: str | None = None,
    on_line: Callable[[str], object] | None = None,
    before_kill: Callable[[int], None] | None = None,
    stop_when: Callable[[], bool] | None = None,
) -> TreeResult:
    """Run a command in its own session with stdout+stderr captured; at the bound kill its whole tree.

    Output is kept bounded (the last TREE_OUTPUT_BYTES). `on_line` gets each line as it arrives
    (without the newline); when it returns True the run is stopped early, as at the bound, and so
    it is when `stop_when()` (polled about every 50 ms, from this thread) returns True.
    `before_kill(root_pid)` runs when the run is cut short, before anything is killed (to take
    stack dumps); keep it bounded. Whatever the command leaves behind when it exits (daemonized
    children, ranks of a launcher that died) is killed too, so nothing it started outlives the
    call, and so it is when the call is left by an exception (Ctrl-C, a signal handler's) or
    `end_everything_started()` runs from another thread. Raises FileNotFoundError when the program
    does not exist.
    """
    import time

    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    with _owned_tree(proc.pid) as known:
        try:
            return _watch_tree(proc, known, argv, started, timeout, on_line, before_kill, stop_when)
        except BaseException:
            # Ctrl-C, a signal turned into an exception, or a bug: the tree ends with us all the same
            _tree_members(proc.pid, known)
            kill_tree(proc.pid, known)
            try:
                proc.stdout.close()
            except OSError:
                pass
            raise


def _watch_tree(proc, known, argv, started, timeout, on_line, before_kill, stop_when) -> TreeResult:
    import select
    import time

    tail = bytearray()
    state = {"dropped": 0, "stop": False, "eof": False}
    partial = bytearray()
    finished = threading.Event()

    def deliver(raw: bytes) -> None:
        if on_line is None:
            return
        try:
            if on_line(raw.decode("utf-8", errors="replace").rstrip("\r")) is True:
                state["stop"] = True
        except Exception:  # a parser bug must not take the run down with it
            pass

    def reader() -> None:
        fd = proc.stdout.fileno()
        try:
            while not finished.is_set():
                ready, _, _ = select.select([fd], [], [], 0.1)
                if not ready:
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    state["eof"] = True
                    break
                tail.extend(chunk)
                if len(tail) > TREE_OUTPUT_BYTES:
                    cut = len(tail) - TREE_OUTPUT_BYTES
                    del tail[:cut]
                    state["dropped"] += cut
                partial.extend(chunk)
                while True:
                    nl = partial.find(b"\n")
                    if nl < 0:
                        break
                    deliver(bytes(partial[:nl]))
                    del partial[: nl + 1]
                if len(partial) > _TREE_PARTIAL_LINE:
                    deliver(bytes(partial))
                    partial.clear()
        except (OSError, ValueError):
            state["eof"] = True

    thread = threading.Thread(target=reader, name="run_tree:reader", daemon=True)
    thread.start()
    deadline = started + timeout
    killed = False  # the loop gave up on the command (bound reached or stop asked)
    stopped = False
    next_scan = 0.0
    while proc.poll() is None:
        now = time.monotonic()
        if not state["stop"] and stop_when is not None:
            try:
                state["stop"] = bool(stop_when())
            except Exception:  # a buggy predicate must not turn into a run without a bound
                pass
        if state["stop"] or now >= deadline:
            killed, stopped = True, bool(state["stop"])
            break
        if now >= next_scan:
            # Remember descendants while they are still ours: once their parent dies they are
            # re-parented and no longer found under the root.
            _tree_members(proc.pid, known)
            next_scan = now + _TREE_POLL
        time.sleep(min(0.05, max(0.0, deadline - now)))

    if killed:
        if before_kill is not None:
            try:
                before_kill(proc.pid)
            except Exception:  # a failed dump must not keep the tree alive
                pass
        _tree_members(proc.pid, known)
    leftovers = kill_tree(proc.pid, known)
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass
    # Every writer of the pipe is dead now; let the reader drain what is left.
    thread.join(2.0)
    finished.set()
    thread.join(0.5)
    if partial and not thread.is_alive():
        deliver(bytes(partial))
    try:
        proc.stdout.close()
    except OSError:
        pass
    return TreeResult(
        argv=argv,
        returncode=None if killed else proc.returncode,
        output=bytes(tail).decode("utf-8", errors="replace"),
        timed_out=killed and not stopped,
        seconds=time.monotonic() - started,
        dropped_bytes=state["dropped"],
        stopped_early=stopped,
        pids=sorted(known),
        leftovers=leftovers,
    )


def _proc_create_time(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return None
