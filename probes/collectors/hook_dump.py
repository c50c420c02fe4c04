"""Stacks and progress from a job that installed `debug_stuck.hook`, for when ptrace is denied.

The hook registered faulthandler for one signal and wrote a marker naming it. We send that signal
only to a process whose marker we found and checked (the same PID and start time, a file of the
process's own user, not a link): sent to a process without the handler, the signal would end it.
Each signal appends every thread's stack to the process's stack file; two dumps a window apart
tell a frozen thread from a moving one, like two py-spy samples.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from dataclasses import dataclass
from typing import List, Optional, Tuple

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.core.dumptext import parse_faulthandler, short_path
from debug_stuck.hook import ENV_DIR, hook_dir, process_start_ticks
from debug_stuck.inputs import InputError, read_input
from debug_stuck.probes.collectors.procs import InspectError, process_uid, read_process_environ
from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

READ_SECONDS = 2.0  # one bounded read of a marker, a heartbeat or a dump
DUMP_WAIT = 3.0  # how long a signalled process gets to write its dump
MAX_DUMP_BYTES = 1 << 20
TOOL = "debug_stuck.hook (faulthandler)"


@dataclass
class HookMarker:
    pid: int
    signal: int
    signal_name: str
    stacks: str
    heartbeat: str
    path: str


def _read(path: str, limit: int = 65536) -> bytes:
    try:
        return read_input(path, "hook file", limit, READ_SECONDS)
    except InputError as exc:
        raise OSError(exc.one_line()) from None  # the callers' "cannot read" path


def _target_env_dir(pid: int) -> Optional[str]:
    """The job's own DEBUG_STUCK_HOOK_DIR, when its environment is readable."""
    try:
        return read_process_environ(pid).get(ENV_DIR)
    except InspectError:
        return None


def find_marker(pid: int) -> Tuple[Optional[HookMarker], str]:
    """The checked marker of pid's hook, or None and why not."""
    uid = process_uid(pid)
    if uid is None:
        return None, f"process {pid} is gone"
    folders = [_target_env_dir(pid), os.environ.get(ENV_DIR), hook_dir(uid, env={})]
    for folder in dict.fromkeys(f for f in folders if f):
        path = os.path.join(folder, f"{pid}.json")
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
            return None, f"{path} is not a regular file of the job's user: not trusted"
        try:
            data = json.loads(_read(path))
        except (OSError, CallTimedOut, ValueError) as exc:
            return None, f"cannot read the hook's marker {path}: {exc}"
        if data.get("pid") != pid or data.get("start_ticks") != process_start_ticks(pid):
            return None, f"{path} belongs to an earlier process with the same PID"
        try:
            return (
                HookMarker(
                    pid,
                    int(data["signal"]),
                    str(data["signal_name"]),
                    str(data["stacks"]),
                    str(data["heartbeat"]),
                    path,
                ),
                "",
            )
        except (KeyError, TypeError, ValueError):
            return None, f"{path} is malformed"
    return None, "no debug_stuck.hook marker for it (the job did not install the hook)"


def read_heartbeat(marker: HookMarker) -> Optional[Tuple[float, Optional[int]]]:
    """(time of the last heartbeat, the step it recorded or None)."""
    try:
        text = _read(marker.heartbeat, 256).decode("ascii", "replace").split()
    except (OSError, CallTimedOut):
        return None
    if not text:
        return None
    try:
        return float(text[0]), (int(text[1]) if len(text) > 1 else None)
    except ValueError:
        return None


def _size(path: str) -> int:
    try:
        return call_with_timeout(lambda: os.stat(path).st_size, READ_SECONDS, f"stat {path}")
    except (OSError, CallTimedOut):
        return -1


LOCK_WAIT = 2 * DUMP_WAIT + READ_SECONDS  # another request's dump, read, then ours


def _lock_stacks(path: str) -> Tuple[Optional[int], Optional[str]]:
    """An exclusive lock on the job's stack file, so that two diagnoses at once each get a dump of
    their own: without it both signals land in one stretch of the file and each reader lists every
    thread twice. faulthandler writes through its own descriptor and ignores the (advisory) lock."""

    def opened() -> int:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)

    try:
        fd = call_with_timeout(opened, READ_SECONDS, f"opening {path}")
    except (OSError, CallTimedOut) as exc:
        return None, f"cannot open the hook's stack file {path}: {exc}"
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None, f"the hook's stack file {path} is not a regular file"
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd, None
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None, f"another diagnosis kept the job's stack file locked for {LOCK_WAIT:g} s"
            time.sleep(0.05)
        except OSError:  # a file system without flock: go on unlocked
            return fd, None


def _one_dump(marker: HookMarker) -> Tuple[Optional[StackDump], Optional[str]]:
    started = time.monotonic()
    fd, problem = _lock_stacks(marker.stacks)
    if fd is None:
        return None, problem
    try:
        return _dump_locked(marker, fd, started)
    finally:
        os.close(fd)  # releases the lock


def _dump_locked(marker: HookMarker, fd: int, started: float) -> Tuple[Optional[StackDump], Optional[str]]:
    before = _size(marker.stacks)
    if before < 0:
        return None, f"cannot read the hook's stack file {marker.stacks}"
    try:
        os.kill(marker.pid, marker.signal)
    except PermissionError:
        return None, f"not allowed to send {marker.signal_name} to {marker.pid} (run as the job's user)"
    except ProcessLookupError:
        return None, f"process {marker.pid} is gone"
    # faulthandler writes from the signal handler itself; wait until the file stops growing
    deadline = started + DUMP_WAIT
    size, steady = before, 0
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = _size(marker.stacks)
        if now > size:
            size, steady = now, 0
        elif now > before:
            steady += 1
            if steady >= 2:
                break
    if size <= before:
        return None, f"the hook wrote no dump within {DUMP_WAIT:g} s of {marker.signal_name}"

    def read() -> bytes:
        start = max(before, size - MAX_DUMP_BYTES)
        return os.pread(fd, size - start, start)

    try:
        text = call_with_timeout(read, READ_SECONDS, f"reading {marker.stacks}").decode("utf-8", "replace")
    except (OSError, CallTimedOut) as exc:
        return None, f"cannot read the dump: {exc}"
    threads = parse_dump(marker.pid, text.splitlines())
    return StackDump(marker.pid, threads, TOOL, time.monotonic() - started), None


def parse_dump(pid: int, lines: List[str]) -> List[ThreadStack]:
    """faulthandler's "Thread 0x... (most recent call first):" blocks as threads; the one whose
    outermost frame is a module's top level is the main thread (its tid is the PID, as py-spy has it)."""
    threads = []
    seen = set()
    for ident, found in parse_faulthandler(lines):
        if ident in seen:  # a second dump in the same stretch (someone else's signal): one copy each
            continue
        seen.add(ident)
        frames = [Frame(func, short_path(file, basename=True), line, path=file) for func, file, line in found]
        main = bool(frames) and frames[-1].function == "<module>"
        tid = pid if main else int(ident, 16)
        threads.append(ThreadStack(tid, "MainThread" if main else f"Thread {ident}", "unknown", frames))
    return threads


def dump_by_hook(marker: HookMarker, samples: int = 2, interval: float = 1.0) -> StackSeries:
    """`samples` dumps `interval` seconds apart; a series like py-spy's, or one with the error."""
    series = StackSeries(pid=marker.pid)
    for i in range(max(1, samples)):
        if i:
            time.sleep(interval)
        dump, error = _one_dump(marker)
        if dump is None:
            series.error = error
            break
        series.dumps.append(dump)
    return series


FR_WAIT = 20.0  # torch symbolizes every entry's Python frames: a full ring buffer takes seconds
_FR_REQUEST = b"dump\n"


def _identity(path: str) -> Optional[Tuple[int, int]]:
    """(inode, mtime) of path, None when absent: the hook renames every new file into place."""
    try:
        st = call_with_timeout(lambda: os.lstat(path), READ_SECONDS, f"stat {path}")
    except (OSError, CallTimedOut):
        return None
    return st.st_ino, st.st_mtime_ns


def request_fr_dump(marker: HookMarker, wait: float = FR_WAIT) -> Tuple[Optional[str], Optional[str]]:
    """Ask the job's hook for a Flight Recorder dump: (path of the fresh `<pid>.fr`, None), or
    (None, why not). Writes one line into the hook's request FIFO; nothing else in the job."""
    try:
        data = json.loads(_read(marker.path))
    except (OSError, CallTimedOut, ValueError) as exc:
        return None, f"cannot read the hook's marker {marker.path}: {exc}"
    request, dump, error = (data.get(k) for k in ("fr_request", "fr_dump", "fr_error"))
    if not all(isinstance(p, str) for p in (request, dump, error)):
        return None, "the job's hook offers no Flight Recorder dump (TORCH_FR_BUFFER_SIZE was not above 0 at install)"
    folder = os.path.dirname(marker.path)
    if any(os.path.dirname(p) != folder for p in (request, dump, error)):
        return None, f"{marker.path} names files outside its folder: not trusted"
    try:
        st = call_with_timeout(lambda: os.lstat(request), READ_SECONDS, f"stat {request}")
    except (OSError, CallTimedOut) as exc:
        return None, f"cannot find the hook's request FIFO {request}: {exc}"
    uid = process_uid(marker.pid)
    if uid is None:
        return None, f"process {marker.pid} is gone"
    if not stat.S_ISFIFO(st.st_mode) or st.st_uid != uid:
        return None, f"{request} is not a FIFO of the job's user: not trusted"
    before = _identity(dump), _identity(error)
    try:
        fd = os.open(request, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return None, f"the hook of {marker.pid} does not listen on {request} (has the job exited?)"
        return None, f"cannot open the hook's request FIFO {request}: {exc.strerror or exc}"
    try:
        os.write(fd, _FR_REQUEST)
    except BlockingIOError:
        pass  # the FIFO is full of requests not yet served: ours is among them
    except OSError as exc:
        return None, f"cannot write to the hook's request FIFO {request}: {exc.strerror or exc}"
    finally:
        os.close(fd)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if _identity(dump) not in (None, before[0]):
            return dump, None
        if _identity(error) not in (None, before[1]):
            try:
                why = _read(error, 4096).decode("utf-8", "replace").strip()
            except (OSError, CallTimedOut) as exc:
                why = f"(its error file is unreadable: {exc})"
            return None, f"the hook could not dump the Flight Recorder: {why}"
        time.sleep(0.05)
    return None, f"the hook wrote no Flight Recorder dump within {wait:g} s (a thread of the job may hold the GIL)"
