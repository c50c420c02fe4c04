"""What each blocked thread waits on, down to the object, from what Linux exposes in /proc.

Two steps, because attaching a stack reader interrupts a blocked system call for a moment:

1. `read_syscalls(pid)`, with the states, before any stack dump: for every thread, the system
   call it sits in and its arguments (`/proc/P/task/T/syscall`), else its wait channel.
2. `resolve_waits(infos)`, after: each argument followed to the object it names. A file
   descriptor becomes a regular file (its mount, file system, network or local), a FIFO or pipe
   (who holds the other end, from a bounded scan of every process's fds: none means "no writer"
   or "no reader"), a socket (local and remote address and TCP state from /proc/net, and the
   process holding the other end when it is on this machine); a path being opened is read from
   the process's memory; `wait4` names the child, `flock`/`fcntl` the holder of the lock
   (/proc/locks), `poll` and `epoll` the descriptors they watch.

Every read is bounded in time and the whole resolution has one budget: /proc of a process in
uninterruptible sleep can block, and a machine in trouble has many of those. What could not be
read is said in the wait's `error`, never raised.
"""

from __future__ import annotations

import os
import platform
import re
import stat
import struct
import time
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.probes.collectors.procfs import bounded_read as _bounded
from debug_stuck.probes.collectors.procfs import fd_target
from debug_stuck.probes.collectors.procfs import read_text as _read_text
from debug_stuck.probes.collectors.sockets import (
    RECEIVE_GAP,
    UNIX_PEERS,
    _endpoint,
    socket_tables,
    tcp_last_receive,
    tcp_receiving,
    unix_peers,
)

RESOLVE_BUDGET = 3.0  # seconds for resolving every wait of a job
SCAN_SECONDS = 1.5  # the scan of every process's fds for the other end of a pipe, FIFO or socket
SCAN_MAX_FDS = 200_000
MAX_THREADS = 256
MAX_POLL_FDS = 64
# a pseudo-terminal's master end, as /proc/PID/fd names it; its fdinfo's tty-index is the N of the
# /dev/pts/N slave it drives (Linux 4.14+, drivers/tty/pty.c pty_show_fdinfo)
PTY_MASTERS = ("/dev/ptmx", "/dev/pts/ptmx")
PTY_SLAVE = re.compile(r"^/dev/pts/(\d+)$")
PATH_MAX = 4096
AT_FDCWD = -100

NETWORK_FS = re.compile(
    r"^(nfs\d?|cifs|smb3?|fuse(\..*)?|lustre|gpfs|beegfs|ceph|glusterfs|9p|afs|panfs|weka(fs)?|s3fs|davfs|sshfs)$"
)
# Wait channels, for threads whose system call cannot be read (another user's process, say).
WCHAN_OPS = (
    (re.compile(r"wait_for_partner|fifo_open"), "open"),
    (re.compile(r"pipe_read|pipe_wait_readable"), "read"),
    (re.compile(r"pipe_write|pipe_wait_writable"), "write"),
    (re.compile(r"unix_stream_read|unix_dgram_recv|tcp_recvmsg|sk_wait_data|skb_wait_for_more"), "recv"),
    (re.compile(r"inet_csk_accept|unix_accept"), "accept"),
    (re.compile(r"inet_wait_for_connect|__inet_stream_connect"), "connect"),
    # anchored: newer kernels name a futex wait futex_do_wait, which is no wait for a child
    (re.compile(r"^do_wait\b|kernel_wait4"), "wait-child"),
    (re.compile(r"futex"), "futex"),
    (re.compile(r"hrtimer_nanosleep|do_nanosleep"), "sleep"),
    (re.compile(r"do_sys_poll|do_select|core_sys_select|poll_schedule_timeout"), "poll"),
    (re.compile(r"ep_poll"), "epoll"),
    (re.compile(r"locks_lock_inode_wait|flock_lock_inode_wait|posix_lock_inode_wait|locks_wait"), "lock"),
    (re.compile(r"nfs|rpc_wait|fuse_|io_schedule|folio_wait|wait_on_page|jbd2|blk_"), "io"),
)


@dataclass
class Wait:
    """What one thread waits on. `op` is the kind of wait (see syscalls.yaml), `object` the thing."""

    tid: int
    op: str  # open, read, write, connect, accept, recv, send, poll, select, epoll, wait-child, lock, futex,
    # sleep, pause, sync, ioctl, io (a kernel wait with no system call read), running, unknown
    syscall: Optional[str] = None
    args: List[int] = field(default_factory=list)
    fd: Optional[int] = None
    object: Optional[dict] = None  # {"kind": file|fifo|pipe|socket|dir|device|tty|anon|other, ...}
    peers: List[dict] = field(default_factory=list)  # the other holders: {"pid", "fd", "mode", "state", "name", "ppid"}
    watched: List[dict] = field(default_factory=list)  # poll/epoll: {"fd", "object"}
    child: Optional[int] = None  # wait-child: the pid waited for (-1: any child)
    lock_holders: List[int] = field(default_factory=list)
    lock_self: bool = False  # lock: the waiter's own process holds a lock on the file (another open of it)
    flags: Optional[int] = None  # open: O_ACCMODE (0 read, 1 write, 2 both)
    timeout_ms: Optional[int] = None  # poll, epoll_wait: the timeout it was given, -1 for none (futex too)
    wchan: Optional[str] = None
    error: Optional[str] = None

    def to_dict(self, with_args: bool = False) -> dict:
        out = {"tid": self.tid, "op": self.op}
        if with_args and self.args:
            out["args"] = list(self.args)
        for key in ("syscall", "fd", "object", "child", "flags", "timeout_ms", "wchan", "error"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        for key in ("peers", "watched", "lock_holders", "lock_self"):
            value = getattr(self, key)
            if value:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Wait:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


# -- the syscall table ------------------------------------------------------------------------------

_TABLE: Optional[Tuple[Dict[int, str], Dict[str, dict]]] = None


def syscall_table() -> Tuple[Dict[int, str], Dict[str, dict]]:
    """(number -> name for this machine's architecture, name -> argument roles), from
    skills/data/syscalls.yaml."""
    global _TABLE
    if _TABLE is None:
        from debug_stuck.kb import load_table

        data = load_table("syscalls.yaml")
        arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine(), platform.machine())
        numbers = {int(n): name for name, n in (data["numbers"].get(arch) or {}).items()}
        _TABLE = (numbers, data["syscalls"])
    return _TABLE


def _thread_stat(pid: int, tid: int) -> Tuple[str, str]:
    """(state letter, name) of a thread, from its stat file: the name is between the first "(" and
    the last ")", and may hold either."""
    text = _read_text(f"/proc/{pid}/task/{tid}/stat", 4096)
    return text.rsplit(")", 1)[-1].split()[0], text.partition("(")[2].rpartition(")")[0]


def _thread_state(pid: int, tid: int) -> str:
    return _thread_stat(pid, tid)[0]


def _parent(pid: int) -> Optional[int]:
    """The parent's pid, from the stat file's fourth field (after the name's last ")")."""
    text = _read_text(f"/proc/{pid}/stat", 4096)
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


# -- step 1: the system calls, before the stacks ----------------------------------------------------


def parse_syscall(text: str) -> Tuple[Optional[int], List[int]]:
    """("running" -> None, []); ("-1 sp pc" -> -1, []); ("NR a0 .. a5 sp pc" -> NR, [a0..a5])."""
    parts = text.split()
    if not parts or parts[0] == "running":
        return None, []
    number = int(parts[0])
    if number < 0:
        return number, []
    return number, [int(p, 16) for p in parts[1:7]]


def wait_from_syscall(tid: int, text: str, wchan: Optional[str] = None) -> Wait:
    numbers, specs = syscall_table()
    if not text:
        return _from_wchan(tid, wchan)
    number, args = parse_syscall(text)
    if number is None:
        return Wait(tid, "running")
    if number < 0:
        return _from_wchan(tid, wchan)  # blocked in the kernel, not in a system call (a page fault)
    name = numbers.get(number)
    spec = specs.get(name or "")
    if spec is None:
        return Wait(tid, "unknown", syscall=name or f"syscall {number}", args=args, wchan=wchan)
    if spec["op"] == "restart":
        # restart_syscall (syscalls(2)): an interrupted poll or sleep resumed. The wchan says which;
        # a poll's arguments are still in the registers /proc shows (read for its descriptors).
        wait = _from_wchan(tid, wchan)
        if wait.op == "poll":
            wait.syscall, wait.args = "poll", args
        return wait
    wait = Wait(tid, spec["op"], syscall=name, args=args, wchan=wchan)
    if "fd" in spec:
        wait.fd = _signed32(args[spec["fd"]])
    if "pid" in spec:
        wait.child = _signed32(args[spec["pid"]])
    if "flags" in spec:
        wait.flags = args[spec["flags"]] & 3
    if "timeout" in spec and len(args) > spec["timeout"]:
        wait.timeout_ms = max(-1, _signed32(args[spec["timeout"]]))  # any negative: no timeout (poll(2))
    if "timeout_pointer" in spec and len(args) > spec["timeout_pointer"] and args[spec["timeout_pointer"]] == 0:
        wait.timeout_ms = -1  # a NULL timespec: no deadline; one given is left unread (None)
    return wait


def _from_wchan(tid: int, wchan: Optional[str]) -> Wait:
    for pattern, op in WCHAN_OPS:
        if wchan and pattern.search(wchan):
            return Wait(tid, op, wchan=wchan)
    return Wait(tid, "unknown", wchan=wchan)


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def read_syscalls(pid: int, states: Optional[Dict[int, Tuple[str, Optional[str], str]]] = None) -> Dict[int, Wait]:
    """tid -> Wait for every thread of pid (bounded; unreadable threads are left out). `states`, when
    given, receives tid -> (state letter, wait channel or None, thread name) of every thread read."""
    out: Dict[int, Wait] = {}
    tids = _bounded(lambda: sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")), f"threads of {pid}", []) or []
    for tid in tids[:MAX_THREADS]:
        # one bounded call per thread for its three files: a thread per file cost ~0.5 s on a job
        # of 73 processes
        read = _bounded(lambda tid=tid: _read_thread(pid, tid), f"state of thread {tid}", None)
        if read is None:
            continue
        state, wchan, text, name = read
        if states is not None:
            states[tid] = (state, wchan, name)
        if state == "R":
            out[tid] = Wait(tid, "running")
            continue
        out[tid] = wait_from_syscall(tid, text or "", wchan)
        if text is None:
            out[tid].error = "the system call could not be read (ptrace rights): from the wait channel only"
    return out


def _read_thread(pid: int, tid: int) -> Tuple[str, Optional[str], Optional[str], str]:
    """(state, wchan or None, the syscall file's text or None when unreadable, the thread's name)."""
    state, name = _thread_stat(pid, tid)
    if state == "R":
        return state, None, None, name
    base = f"/proc/{pid}/task/{tid}"
    try:
        wchan: Optional[str] = _read_text(f"{base}/wchan", 256).strip()
    except OSError:
        wchan = None
    try:
        text: Optional[str] = _read_text(f"{base}/syscall", 512).strip()
    except OSError:
        text = None
    return state, (None if wchan in (None, "", "0") else wchan), text, name


# -- step 2: what the arguments name ------------------------------------------------------------------


class _Budget:
    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def fd_mode(pid: int, fd: int) -> Optional[str]:
    """ "r", "w" or "rw" from /proc/P/fdinfo/N's flags."""
    text = _bounded(lambda: _read_text(f"/proc/{pid}/fdinfo/{fd}", 4096), f"fdinfo {fd} of {pid}") or ""
    m = re.search(r"^flags:\s+(\d+)", text, re.M)
    if not m:
        return None
    return {0: "r", 1: "w", 2: "rw"}.get(int(m.group(1), 8) & 3)


def read_memory_string(pid: int, address: int, limit: int = PATH_MAX) -> Optional[str]:
    """A NUL-terminated string from the process's memory (ptrace rights; None when not readable)."""

    def read():
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as fh:
            fh.seek(address)
            data = fh.read(limit)
        return data.split(b"\0", 1)[0].decode("utf-8", "replace")

    if address <= 0:
        return None
    return _bounded(read, f"memory of {pid}")


def read_memory(pid: int, address: int, size: int) -> Optional[bytes]:
    def read():
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as fh:
            fh.seek(address)
            return fh.read(size)

    return _bounded(read, f"memory of {pid}") if address > 0 and size > 0 else None


def mount_of(pid: int, path: str) -> Optional[dict]:
    """{"mount", "fs", "source", "network"} of the mount holding path, in pid's mount namespace."""
    text = _bounded(lambda: _read_text(f"/proc/{pid}/mountinfo"), f"mountinfo of {pid}") or ""
    best = None
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        point = fields[4].replace("\\040", " ")
        if (path == point or path.startswith(point.rstrip("/") + "/")) and (best is None or len(point) > len(best[0])):
            best = (point, tail[0], tail[1])
    if best is None:
        return None
    return {"mount": best[0], "fs": best[1], "source": best[2], "network": bool(NETWORK_FS.match(best[1]))}


def path_object(pid: int, path: str, where: Optional[str] = None) -> dict:
    """What a path is (without opening it: opening a FIFO would block, or wake the job). `where`:
    the path whose mount counts, when `path` is a /proc link to the open file."""
    obj: dict = {"kind": "file", "path": path}
    st = _bounded(lambda: os.stat(path), f"stat {path}")
    if st is None:
        obj["kind"] = "missing" if not _bounded(lambda: os.path.lexists(path), f"lstat {path}", True) else "unknown"
    elif stat.S_ISFIFO(st.st_mode):
        obj["kind"] = "fifo"
    elif stat.S_ISDIR(st.st_mode):
        obj["kind"] = "dir"
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        obj["kind"] = "device"
    elif stat.S_ISSOCK(st.st_mode):
        obj["kind"] = "socket"
    if st is not None:
        obj["inode"] = st.st_ino
        obj["dev"] = st.st_dev
    mount = mount_of(pid, where or path)
    if mount:
        obj.update(mount)
    return obj


def target_object(pid: int, fd: int, target: Optional[str]) -> Optional[dict]:
    if target is None:
        return None
    m = re.match(r"^(pipe|socket):\[(\d+)\]$", target)
    if m:
        return {"kind": m.group(1), "inode": int(m.group(2))}
    if target.startswith("anon_inode:"):
        return {"kind": "anon", "what": target.split(":", 1)[1].strip("[]")}
    if target.startswith(("/dev/pts/", "/dev/tty", "/dev/console")):
        return {"kind": "tty", "path": target}
    if target.startswith("/"):
        path = target[: -len(" (deleted)")] if target.endswith(" (deleted)") else target
        obj = path_object(pid, f"/proc/{pid}/fd/{fd}", where=path)  # the open file itself, even if renamed
        obj["path"] = path
        if target.endswith(" (deleted)"):
            obj["deleted"] = True
        return obj
    return {"kind": "other", "what": target}


# -- the other end: who else holds a pipe, FIFO or socket ----------------------------------------------


def scan_holders(wanted: Dict[str, List[Tuple[int, int]]], budget: float = SCAN_SECONDS) -> Dict[str, List[dict]]:
    """For each wanted fd target ("pipe:[123]", "socket:[456]", a FIFO path), the processes holding it
    (every process's fds, bounded in time and count): {"pid", "fd", "mode", "state", "name", "ppid"}."""
    found: Dict[str, List[dict]] = {key: [] for key in wanted}
    if not wanted:
        return found
    deadline = time.monotonic() + budget
    seen = 0

    def scan():
        nonlocal seen
        for entry in os.scandir("/proc"):
            if time.monotonic() > deadline or seen > SCAN_MAX_FDS:
                return False
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for name in fds:
                seen += 1
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{name}")
                except OSError:
                    continue
                if target in found:
                    found[target].append({"pid": pid, "fd": int(name)})
        return True

    complete = _bounded_long(scan, budget + 0.5)
    for holders in found.values():
        for holder in holders:
            holder["mode"] = fd_mode(holder["pid"], holder["fd"])
            holder["state"] = _bounded(lambda h=holder: _thread_state(h["pid"], h["pid"]), "state", "?")
            holder["name"] = _bounded(lambda h=holder: _read_text(f"/proc/{h['pid']}/comm", 256).strip(), "comm")
            holder["ppid"] = _bounded(lambda h=holder: _parent(h["pid"]), "ppid", None)
    if not complete:
        found["__incomplete__"] = []
    return found


def _bounded_long(fn, seconds: float):
    try:
        return call_with_timeout(fn, seconds, "scanning open files")
    except (CallTimedOut, OSError):
        return False


def lock_holders() -> Dict[int, List[int]]:
    """{inode: PIDs holding a flock/POSIX lock on it}, from one read of /proc/locks (the waiters' "->"
    lines left out)."""
    text = _bounded(lambda: _read_text("/proc/locks"), "/proc/locks") or ""
    holders: Dict[int, set] = {}
    for line in text.splitlines():
        if "->" in line:
            continue
        f = line.split()
        if len(f) < 6:
            continue
        try:
            pid = int(f[4])
            ino = int(f[5].split(":")[2])
        except (ValueError, IndexError):
            continue
        if pid > 0:
            holders.setdefault(ino, set()).add(pid)
    return {ino: sorted(pids) for ino, pids in holders.items()}


def locks_on(inode: int, dev_minor_major: Optional[Tuple[int, int]] = None) -> List[int]:
    """PIDs holding a flock/POSIX lock on this inode (/proc/locks; the waiters' "->" lines left out)."""
    return lock_holders().get(inode, [])


# -- putting it together -----------------------------------------------------------------------------


def resolve_waits(waits_by_pid: Dict[int, Dict[int, Wait]], budget: float = RESOLVE_BUDGET) -> None:
    """Follow each wait's argument to its object, in place. Threads that run, sleep or wait on a
    futex need nothing more; the rest are resolved until the budget is spent (then `error` says so)."""
    clock = _Budget(budget)
    wanted: Dict[str, List[Tuple[int, int]]] = {}
    sockets: Dict[int, Dict[int, dict]] = {}
    measured = []  # connections a thread waits to read or send on: their tcp_info, from one or two ss calls
    for pid, waits in waits_by_pid.items():
        for wait in waits.values():
            if clock.left() <= 0:
                wait.error = wait.error or "not resolved: the time for resolving waits ran out"
                continue
            _resolve_one(pid, wait, wanted, sockets)
            obj = wait.object or {}
            if (
                wait.op in ("recv", "read", "poll", "send", "write")
                and obj.get("kind") == "socket"
                and obj.get("state") == "ESTABLISHED"
            ):
                measured.append(obj)  # a send too: data that keeps leaving is an upload to a slow reader
            # an event loop (asyncio's, a selector's) reads its connections from an epoll or poll wait
            measured += [w for w in _watched_connections(wait) if w is not obj]
    if measured:
        keys = [(_endpoint(str(obj.get("local"))), _endpoint(str(obj.get("remote")))) for obj in measured]
        if clock.left() > RECEIVE_GAP:
            found = tcp_receiving(keys)
        else:  # no time for a second reading: how long since each last received, from one reading
            last = tcp_last_receive()
            found = {key: (last[key], 0, 0) for key in keys if key in last}
        for obj, key in zip(measured, keys):
            if key in found:
                obj["last_received_ms"], obj["received_bytes"], obj["sent_bytes"] = found[key]
    holders = scan_holders(wanted, min(SCAN_SECONDS, max(0.2, clock.left()))) if wanted else {}
    incomplete = "__incomplete__" in holders
    for pid, waits in waits_by_pid.items():
        for wait in waits.values():
            _attach_peers(pid, wait, holders, incomplete)


def _resolve_one(pid: int, wait: Wait, wanted: Dict[str, list], sockets: Dict[int, Dict[int, dict]]) -> None:
    if wait.op == "open" and wait.args:
        _, specs = syscall_table()
        spec = specs.get(wait.syscall or "", {})
        path = read_memory_string(pid, wait.args[spec.get("path", 0)])
        if path is None:
            wait.error = "the path being opened could not be read (ptrace rights)"
            return
        if not path.startswith("/"):
            dirfd = _signed32(wait.args[spec["dirfd"]]) if "dirfd" in spec else AT_FDCWD
            if dirfd != AT_FDCWD:
                base = fd_target(pid, dirfd)
            else:
                base = _bounded(lambda: os.readlink(f"/proc/{pid}/cwd"), "cwd")
            path = os.path.normpath(os.path.join(base or "", path))
        wait.object = path_object(pid, path)
        if wait.object["kind"] == "fifo":
            wanted.setdefault(path, []).append((pid, wait.tid))
        return
    if wait.op == "poll" and wait.args:
        _, specs = syscall_table()
        spec = specs.get(wait.syscall or "", {})
        data = _poll_array(pid, wait, spec)
        if data is None:
            wait.error = "its poll() returned before the descriptors it watched could be read"
            return
        events = []
        for i in range(len(data) // 8):
            fd, wanted_events, _revents = struct.unpack_from("ihh", data, i * 8)
            if fd >= 0:
                wait.watched.append({"fd": fd, "object": target_object(pid, fd, fd_target(pid, fd))})
                events.append(wanted_events)
        if len(wait.watched) != 1:
            _resolve_watched_sockets(pid, wait, wanted, sockets)
            return
        # A poll on one descriptor is a read or write with a timeout (socket.settimeout, an HTTP
        # client's read timeout): the wait is on that descriptor, resolved as a direct read or write
        # would be (poll(2): POLLIN 0x1 "there is data to read", POLLOUT 0x4 "writing is now possible").
        wait.fd = wait.watched[0]["fd"]
        if events[0] & 0x4 and not events[0] & 0x1:
            wait.op = "write"
    if wait.fd is not None and wait.fd >= 0:
        target = fd_target(pid, wait.fd)
        wait.object = target_object(pid, wait.fd, target)
        if wait.object is None:
            fds = _bounded(lambda: os.listdir(f"/proc/{pid}/fd"), f"fds of {pid}") if target is None else None
            closed = fds is not None and str(wait.fd) not in fds  # the table read, that fd not in it
            wait.error = f"fd {wait.fd} is closed" if closed else f"fd {wait.fd} could not be read"
            return
        kind = wait.object["kind"]
        if kind in ("pipe", "socket") or (kind == "fifo" and target):
            wanted.setdefault(target if kind != "fifo" else wait.object["path"], []).append((pid, wait.tid))
        if kind == "socket":
            _resolve_socket(pid, wait.object, wait.tid, wanted, sockets)
        if kind == "tty" and wait.op == "write" and PTY_SLAVE.match(target or ""):
            for master in PTY_MASTERS:  # who reads what it writes: the pty's master end
                wanted.setdefault(master, []).append((pid, wait.tid))
        if kind in ("file", "fifo") and wait.op == "lock" and "inode" in wait.object:
            holders = locks_on(wait.object["inode"])
            wait.lock_holders, wait.lock_self = [p for p in holders if p != pid], pid in holders
        if wait.op == "epoll":
            wait.watched = _epoll_targets(pid, wait.fd)
            _resolve_watched_sockets(pid, wait, wanted, sockets)
        return


def _poll_array(pid: int, wait: Wait, spec: dict) -> Optional[bytes]:
    """The pollfd array of a thread's poll(), as that call sees it. A loop that polls with a timeout
    (multiprocessing's connection.wait, every 5 s under DataLoader's get) frees its array when each
    call returns, and the next call often gets the same address: memory read in between is some
    other data. An array counts when every descriptor in it is open in the process, and two reads
    of it, with the call's line read again between them, agree; else it is read afresh (3 tries)."""
    for _ in range(3):
        fds, nfds = wait.args[spec.get("fds", 0)], min(wait.args[spec.get("nfds", 1)], MAX_POLL_FDS)
        data = read_memory(pid, fds, 8 * nfds) or b""
        try:
            number, now = parse_syscall(_read_text(f"/proc/{pid}/task/{wait.tid}/syscall", 512).strip())
        except OSError:
            return data  # the thread could not be read again: as read
        if number is None or syscall_table()[0].get(number) not in (wait.syscall, "restart_syscall"):
            return None  # it left poll() for something else
        if now[:2] == wait.args[:2] and read_memory(pid, fds, 8 * nfds) == data and _all_open(pid, data):
            return data
        wait.args = now
    return None


# poll(2)'s event bits (POLLIN 0x1 ... POLLMSG 0x400, POLLRDHUP 0x2000): a pollfd asks for some of them
POLL_EVENTS = 0x27FF


def _all_open(pid: int, data: bytes) -> bool:
    """Every entry of a pollfd array is one: an open descriptor of the process (or a negative one,
    which poll skips) asking for known events."""
    entries = [struct.unpack_from("ihh", data, i * 8) for i in range(len(data) // 8)]
    return all(
        fd < 0 or (events & 0xFFFF and not events & ~POLL_EVENTS & 0xFFFF and fd_target(pid, fd) is not None)
        for fd, events, _ in entries
    )


def _resolve_socket(pid: int, obj: dict, tid: int, wanted: Dict[str, list], sockets: Dict) -> None:
    """A socket's addresses and state, and for a local TCP connection the socket at its other end.
    One read of /proc/net per network namespace, not per process (73 ranks and workers of one job
    share one)."""
    space = _bounded(lambda: os.readlink(f"/proc/{pid}/ns/net"), f"netns of {pid}") or pid
    table = sockets.get(space)
    if table is None:
        table = sockets[space] = socket_tables(pid)
    entry = table.get(obj.get("inode"))
    if entry:
        obj.update(entry)
        _socket_peer(obj, tid, table, wanted)
    if entry and entry.get("proto") == "unix":
        if UNIX_PEERS not in table:
            table[UNIX_PEERS] = unix_peers()  # read once per namespace, as the table itself
        peer = table[UNIX_PEERS].get(obj.get("inode"))
        if peer:
            obj["peer_inode"] = peer  # a multiprocessing Manager, a local service: the process holding it
            wanted.setdefault(f"socket:[{peer}]", []).append((-1, tid))


def _watched_connections(wait: Wait) -> List[dict]:
    """The established TCP connections among the descriptors a poll or epoll wait watches."""
    if wait.op not in ("poll", "select", "epoll"):
        return []
    objects = [w.get("object") or {} for w in wait.watched[:MAX_POLL_FDS]]
    return [
        o for o in objects if o.get("kind") == "socket" and o.get("proto") == "tcp" and o.get("state") == "ESTABLISHED"
    ]


def _resolve_watched_sockets(pid: int, wait: Wait, wanted: Dict[str, list], sockets: Dict) -> None:
    """The sockets a poll or an event loop's epoll watches: an asyncio program waits on its
    connections there, not in a recv of its own. How long since each established one last received
    data (`last_received_ms`, which tells the silent ones from the others) and what it received are
    read once for every wait, by resolve_waits (_watched_connections)."""
    for watched in wait.watched[:MAX_POLL_FDS]:
        obj = watched.get("object") or {}
        if obj.get("kind") == "socket" and "inode" in obj:
            _resolve_socket(pid, obj, wait.tid, wanted, sockets)
        elif obj.get("kind") == "pipe" and "inode" in obj:
            # subprocess's communicate() polls its child's stdout and stderr: who holds their other ends
            wanted.setdefault(f"pipe:[{obj['inode']}]", []).append((pid, wait.tid))


def _socket_peer(obj: dict, tid: int, table: Dict[int, dict], wanted: Dict[str, list]) -> None:
    """A TCP connection to this machine: the socket at the other end, and whether anyone holds it."""
    if obj.get("proto") != "tcp" or obj.get("state") not in ("ESTABLISHED", "SYN_SENT", "CLOSE_WAIT"):
        return
    extra = table.get(-1, {})
    port = obj["remote"].rsplit(":", 1)[1]
    listening = extra.get("listening", {})
    if obj["state"] == "SYN_SENT":
        obj["listener"] = port in listening
        return
    for inode, entry in table.items():
        if inode > 0 and entry.get("local") == obj["remote"] and entry.get("remote") == obj["local"]:
            obj["peer_inode"] = inode
            wanted.setdefault(f"socket:[{inode}]", []).append((-1, tid))
            return
    if any(e["local"] == obj["remote"] and e["remote"] == obj["local"] for e in extra.get("unowned", [])):
        obj["peer_unaccepted"] = True  # the kernel accepted the connection; no process ever called accept()
        obj["listener"] = port in listening
        listener = listening.get(port)
        if listener:  # who holds the listening socket: the process that would accept, if it ran
            obj["listener_inode"] = listener
            wanted.setdefault(f"socket:[{listener}]", []).append((-1, tid))


def _attach_peers(pid: int, wait: Wait, holders: Dict[str, List[dict]], incomplete: bool) -> None:
    for watched in wait.watched:
        held = watched.get("object") or {}
        if held.get("peer_inode"):
            held["peer"] = holders.get(f"socket:[{held['peer_inode']}]", [])[:4]
        if held.get("kind") == "pipe" and f"pipe:[{held.get('inode')}]" in holders:
            ends = holders[f"pipe:[{held['inode']}]"]
            held["peers"] = [h for h in ends if not (h["pid"] == pid and h["fd"] == watched.get("fd"))][:4]
    obj = wait.object
    if not obj:
        return
    key = None
    if obj["kind"] in ("pipe", "socket"):
        key = f"{obj['kind']}:[{obj['inode']}]"
    elif obj["kind"] == "fifo":
        key = obj.get("path")
    if key is not None and key in holders:
        wait.peers = [h for h in holders[key] if not (h["pid"] == pid and h["fd"] == wait.fd)]
    slave = PTY_SLAVE.match(obj.get("path") or "") if obj["kind"] == "tty" else None
    if slave and any(master in holders for master in PTY_MASTERS):
        masters = [h for master in PTY_MASTERS for h in holders.get(master, [])]
        wait.peers = [h for h in masters if _pty_index(h["pid"], h["fd"]) == slave.group(1)][:4]
    if obj.get("peer_inode"):
        obj["peer"] = holders.get(f"socket:[{obj['peer_inode']}]", [])[:4]
    if obj.get("listener_inode"):
        obj["listener_by"] = holders.get(f"socket:[{obj['listener_inode']}]", [])[:4]
    if incomplete:
        obj["holders_incomplete"] = True


def _pty_index(pid: int, fd: int) -> Optional[str]:
    """The N of /dev/pts/N that the pty master fd drives (its fdinfo's tty-index), or None."""
    text = _bounded(lambda: _read_text(f"/proc/{pid}/fdinfo/{fd}", 4096), f"fdinfo {fd} of {pid}") or ""
    found = re.search(r"^tty-index:\s+(\d+)", text, re.M)
    return found.group(1) if found else None


def _epoll_targets(pid: int, epfd: int) -> List[dict]:
    text = _bounded(lambda: _read_text(f"/proc/{pid}/fdinfo/{epfd}", 65536), f"fdinfo {epfd}") or ""
    out = []
    for m in re.finditer(r"^tfd:\s+(\d+)", text, re.M):
        fd = int(m.group(1))
        out.append({"fd": fd, "object": target_object(pid, fd, fd_target(pid, fd))})
        if len(out) >= MAX_POLL_FDS:
            break
    return out


def summarize(waits: Iterable[Wait]) -> List[dict]:
    return [w.to_dict() for w in waits]
