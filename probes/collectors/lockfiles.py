"""The lock file a thread polls for: its path, read from the waiting frame's local variables
(py-spy dump --locals, bounded like every stack read), and whether anything still holds it.

A lock that is only a file (torch's FileBaton for C++ extension builds, filelock's SoftFileLock)
outlives a holder that was killed: every later run then polls for it for ever. Reading the path
needs the frame's locals (FileBaton keeps it on `self`; the caller `_jit_compile` has
`build_directory`; filelock's acquire has `lock_filename`). Nothing here writes or signals.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Dict, List, Optional

from debug_stuck.bounded import run_command

LOCALS_SECONDS = 8.0
# local variable names that hold a lock file's path, and what to add to get the file
PATH_LOCALS = {
    "lock_filename": "",
    "lock_file": "",
    "lock_file_path": "",
    "lock_path": "",
    "lockfile": "",
    "build_directory": "/lock",  # torch.utils.cpp_extension: FileBaton(os.path.join(build_directory, "lock"))
}
LOCK_NAME = re.compile(r"(^|/)[^/]*\.?lock$")
MAX_HEAD = 256


def waited_lock_file(pid: int, tid: int, py_spy: Optional[str], seconds: float = LOCALS_SECONDS) -> Optional[str]:
    """The lock file path thread `tid` of `pid` waits on, from its frames' locals; None when it cannot
    be read (no py-spy, no rights, no such local)."""
    if not py_spy:
        return None
    argv = [py_spy, "dump", "--pid", str(pid), "--json", "--locals", "--nonblocking"]
    result = run_command(argv, seconds, env=dict(os.environ, RUST_BACKTRACE="0"))
    if result.timed_out or result.returncode != 0:
        return None
    try:
        threads = json.loads(result.stdout)
    except ValueError:
        return None
    for thread in threads if isinstance(threads, list) else []:
        if thread.get("os_thread_id") not in (None, tid):
            continue
        for frame in thread.get("frames") or []:
            path = _path_in(frame.get("locals") or [])
            if path:
                return path
    return None


def _path_in(local_vars: List[dict]) -> Optional[str]:
    for var in local_vars:
        value = _string(var.get("repr"))
        if value is None or not value.startswith("/"):
            continue
        name = var.get("name") or ""
        if name in PATH_LOCALS:
            return value.rstrip("/") + PATH_LOCALS[name] if PATH_LOCALS[name] else value
        if LOCK_NAME.search(value):
            return value
    return None


def _string(text) -> Optional[str]:
    """py-spy's repr of a str local: the text in quotes."""
    if not isinstance(text, str) or len(text) < 2 or text[0] not in "\"'" or text[-1] != text[0]:
        return None
    return text[1:-1]


HOLDER_GAP = 0.5  # seconds between the two readings of a lock holder's I/O counters


def describe_lock_file(pid: int, path: str, seconds: float = 3.0) -> Dict[str, object]:
    """{"path", "exists", "holders": [pids with it open], "locked_by": [pids holding a flock/POSIX
    lock on it], "self_locked" (pid itself holds one), "holder_cmdlines", "recorded_pid",
    "recorded_alive"}: read as
    process `pid` sees the path (its mount namespace), every read bounded."""
    from debug_stuck.bounded import call_or
    from debug_stuck.inputs import InputError, read_input
    from debug_stuck.probes.collectors.waits import locks_on, scan_holders

    out: Dict[str, object] = {"path": path}
    where = f"/proc/{pid}/root{path}"  # the path in the job's own mount namespace
    out["exists"] = bool(call_or(False, lambda: os.path.isfile(where), seconds, f"stat {path}"))
    head = ""
    if out["exists"]:
        try:
            head = read_input(where, "lock file", MAX_HEAD, seconds)[:MAX_HEAD].decode("utf-8", "replace")
        except InputError:
            head = ""
    found = scan_holders({path: [(pid, -1)]}, budget=seconds)
    out["holders"] = sorted({h["pid"] for h in found.get(path, []) if h["pid"] != pid})
    # filelock's UnixFileLock, like fcntl.flock in the job's own code, polls a lock another process
    # holds on the file (LOCK_NB, then sleep): /proc/locks names that holder, alive by definition.
    inode = call_or(None, lambda: os.stat(where).st_ino, seconds, f"stat {path}") if out["exists"] else None
    if inode is not None:
        lockers = locks_on(inode)
        out["locked_by"] = [p for p in lockers if p != pid]
        # the waiter's own process holds it: a flock belongs to an open file, so a thread that opens
        # the file again waits for the lock another thread (or an outer frame) of its process took
        out["self_locked"] = pid in lockers
        out["holder_cmdlines"] = {p: _cmdline(p) for p in out["locked_by"][:3]}
    first = head.split()[0] if head.split() else ""
    if first.isdigit():
        out["recorded_pid"] = int(first)
        out["recorded_alive"] = os.path.exists(f"/proc/{first}")
    return out


def _cmdline(pid: int) -> str:
    """The holder's command line, secrets in it redacted (it goes into the report)."""
    from debug_stuck.bounded import call_or
    from debug_stuck.redact import redacted_command_line

    def read() -> bytes:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(4096)

    raw = call_or(b"", read, 1.0, f"cmdline of {pid}") or b""
    return redacted_command_line([p.decode("utf-8", "replace") for p in raw.split(b"\0") if p])


MAX_FDS = 256


def _open_file_among(pid: int, inodes: set) -> Optional[str]:
    """The path of the first regular file pid has open whose inode is among `inodes`."""
    import stat

    fd_dir = f"/proc/{pid}/fd"
    for name in sorted(os.listdir(fd_dir), key=lambda n: int(n) if n.isdigit() else 0)[:MAX_FDS]:
        try:
            target = os.readlink(f"{fd_dir}/{name}")
            if not target.startswith("/"):
                continue
            info = os.stat(f"{fd_dir}/{name}")
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_ino in inodes:
            return target
    return None


def locked_open_file(pid: int, seconds: float = 3.0) -> Optional[str]:
    """The path of a regular file `pid` has open on which another process holds a flock/POSIX lock
    (/proc/locks), else one its own process locks: what a native lock poll waits on (SQLite's busy
    handler, which polls the database file's POSIX lock and keeps no path in a Python local). None when
    there is none or it cannot be read."""
    from debug_stuck.bounded import call_or
    from debug_stuck.probes.collectors.waits import lock_holders

    def scan() -> Optional[str]:
        holders = lock_holders()
        # another process's lock first; else one its own process holds (POSIX locks are per process: a
        # second SQLite connection of the same process waits for the first one's transaction)
        for held in (
            {ino for ino, pids in holders.items() if any(p != pid for p in pids)},
            {ino for ino, pids in holders.items() if pid in pids},
        ):
            found = _open_file_among(pid, held) if held else None
            if found is not None:
                return found
        return None

    return call_or(None, scan, seconds, f"the locked files of {pid}")


def lock_files(
    candidates: Dict[int, int], py_spy: Optional[str], budget: float = 10.0, from_fds: frozenset = frozenset()
) -> Dict[int, dict]:
    """{pid: describe_lock_file(...)} for each {pid: tid} whose waiting frame names a lock file that
    exists (for the pids in `from_fds`, a native lock poll: the open file another process locks), one
    budget for all, with "holder_wrote": the bytes the first holder wrote in HOLDER_GAP
    seconds (None when unreadable). A holder at work (a download into the locked file, a build) will
    let go; one that writes nothing may be stuck itself. Each holder is read once, all in one gap,
    however many ranks wait on its lock."""
    from debug_stuck.probes.collectors.procs import writes_over

    deadline = time.monotonic() + budget
    out: Dict[int, dict] = {}
    for pid, tid in candidates.items():
        left = deadline - time.monotonic()
        if left <= 0.5:
            break
        if pid in from_fds:
            path = locked_open_file(pid, min(3.0, left))
        else:
            path = waited_lock_file(pid, tid, py_spy, min(LOCALS_SECONDS, left))
        if path is None:
            continue
        described = describe_lock_file(pid, path)
        if described.get("exists"):
            out[pid] = described
    holders = {d["locked_by"][0] for d in out.values() if d.get("locked_by")}
    wrote = writes_over(sorted(holders), HOLDER_GAP) if holders else {}
    for described in out.values():
        if described.get("locked_by"):
            described["holder_wrote"] = wrote.get(described["locked_by"][0])
    return out


__all__ = ["describe_lock_file", "lock_files", "locked_open_file", "waited_lock_file"]
