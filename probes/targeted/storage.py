"""storage: can the job's directories still take a read and a write, and how fast?

For each directory the job uses (--path, or from a live job --pid: its cwd, the directories of
its open files, path arguments of its command line; its DataLoader workers included) it finds
the filesystem in the job's own mount table (network filesystems hang when their server does),
checks free space and inodes, and times a small write + fsync + read of a temporary file it
creates there and always removes. It never opens the user's files. Every filesystem call runs
bounded: path resolution in daemon threads, statvfs and the write test in a child process that
is killed at its limit, so a dead NFS mount makes a finding, not a hung tool.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import psutil

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.probes.targeted.base import Finding, ProbeContext, ProbeResult, TargetNotInspectable, worst_status

# the generic bounded child runner (kills the whole tree at the limit) and its marker reader
from debug_stuck.probes.targeted.miopen import child_marks, run_bounded

NAME = "storage"

TEST_BYTES = 1 << 20
SLOW_S = 1.0
LOW_FREE_RATIO = 0.05
LOW_FREE_BYTES = 10 * 10**9
MAX_DIRS = 12

# Filesystems whose calls wait on a server: when it stops answering, reads and writes block
# (hard mounts never give up). FUSE is user space: s3fs, gcsfuse, sshfs, rclone, ceph-fuse...
NETWORK_FS = {
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "lustre",
    "gpfs",
    "beegfs",
    "ceph",
    "9p",
    "virtiofs",
    "glusterfs",
    "afs",
    "wekafs",
    "panfs",
    "orangefs",
    "pvfs2",
}
LOCAL_FUSE = {"fuse.lxcfs", "fuse.fuse-overlayfs", "fuse.squashfuse", "fuse.snapfuse", "fuse.portal"}
# Where checkpoints and outputs usually go; a directory the job writes into counts too.
CHECKPOINT_NAME = re.compile(r"(?i)checkpoint|ckpt|saved?_?model|snapshot|weights|(^|/)outputs?(/|$)|(^|/)runs(/|$)")


def is_network_fs(fstype: str) -> bool:
    return fstype in NETWORK_FS or (fstype.startswith("fuse.") and fstype not in LOCAL_FUSE)


# --------------------------------------------------------------------------------------------
# The mount table
# --------------------------------------------------------------------------------------------


@dataclass
class Mount:
    mount_id: int
    parent_id: int
    device: str  # major:minor
    root: str
    point: str
    options: List[str]
    fstype: str
    source: str
    super_options: List[str]

    def to_dict(self) -> dict:
        return asdict(self)


def _unescape(text: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text: str) -> List[Mount]:
    """/proc/<pid>/mountinfo (proc(5)); malformed lines are skipped."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        a, b = left.split(), right.split()
        if len(a) < 6 or len(b) < 2:
            continue
        try:
            mount_id, parent_id = int(a[0]), int(a[1])
        except ValueError:
            continue
        mounts.append(
            Mount(
                mount_id,
                parent_id,
                a[2],
                _unescape(a[3]),
                _unescape(a[4]),
                a[5].split(","),
                b[0],
                _unescape(b[1]),
                b[2].split(",") if len(b) > 2 else [],
            )
        )
    return mounts


def mount_for(path: str, mounts: Sequence[Mount]) -> Optional[Mount]:
    """The mount a path lives on: the longest mount point that contains it, the last one mounted
    when several are stacked on the same point."""
    best: Optional[Mount] = None
    for m in mounts:
        point = m.point.rstrip("/") or "/"
        inside = point == "/" or path == point or path.startswith(point + "/")
        if inside and (best is None or len(point) >= len(best.point.rstrip("/") or "/")):
            best = m
    return best


def read_mountinfo(pid: Optional[int] = None) -> Tuple[List[Mount], Optional[str]]:
    """The job's own mount table (its mount namespace may differ from ours, e.g. in a container)."""
    where = f"/proc/{pid}/mountinfo" if pid else "/proc/self/mountinfo"

    def read(path: str) -> str:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    try:
        return parse_mountinfo(call_with_timeout(lambda: read(where), 3.0, where)), None
    except (OSError, CallTimedOut) as exc:
        if pid:
            try:
                mounts = parse_mountinfo(read("/proc/self/mountinfo"))
                return mounts, f"{where}: {exc}; used this process's mount table"
            except OSError:
                pass
        return [], f"{where}: {exc}"


# --------------------------------------------------------------------------------------------
# Which paths: --path, or those of a live job
# --------------------------------------------------------------------------------------------


@dataclass
class Candidate:
    path: str
    origin: str  # "--path", "cwd of 123", "open file of 123", "argument of 123"
    writes: bool = False  # the job has a file open for writing here
    is_file: Optional[bool] = None  # known from where it came (open files are files)


_SKIP_PREFIXES = ("/proc/", "/sys/", "/dev/", "/run/", "/usr/lib/", "/lib/", "/usr/share/", "/etc/")
_PATHISH = re.compile(r"^(?:/|\./|\.\./|~/)|/")


def _args_paths(cmdline: Sequence[str], cwd: Optional[str]) -> List[str]:
    """Arguments that look like paths: /abs, ./rel, a/b, and the value of --opt=/path."""
    out = []
    for arg in cmdline[1:]:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if value.startswith("-") or not _PATHISH.search(value) or "://" in value or len(value) > 4096:
            continue
        value = os.path.expanduser(value)
        if not os.path.isabs(value):
            if not cwd:
                continue
            value = os.path.join(cwd, value)
        out.append(os.path.normpath(value))
    return out


def job_candidates(pids: Sequence[int]) -> Tuple[List[Candidate], List[str]]:
    """Paths of the given processes and their descendants (DataLoader workers read the data)."""
    found: List[Candidate] = []
    errors: List[str] = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root] + call_with_timeout(lambda r=root: r.children(recursive=True), 3.0, f"children of {pid}")
        except psutil.NoSuchProcess:
            errors.append(f"process {pid} does not exist (it may have exited)")
            continue
        except (psutil.AccessDenied, CallTimedOut) as exc:
            errors.append(f"cannot read process {pid}: {exc}")
            continue
        for proc in procs:
            try:
                cwd = call_with_timeout(proc.cwd, 3.0, f"cwd of {proc.pid}")
                found.append(Candidate(cwd, f"cwd of {proc.pid}", is_file=False))
            except (psutil.Error, CallTimedOut, OSError) as exc:
                errors.append(f"cwd of {proc.pid}: {exc}")
                cwd = None
            try:
                for f in call_with_timeout(proc.open_files, 3.0, f"open files of {proc.pid}"):
                    writes = any(c in (f.mode or "") for c in "wa+")
                    found.append(Candidate(f.path, f"open file of {proc.pid}", writes=writes, is_file=True))
            except (psutil.Error, CallTimedOut, OSError) as exc:
                errors.append(f"open files of {proc.pid}: {exc}")
            try:
                cmdline = call_with_timeout(proc.cmdline, 3.0, f"cmdline of {proc.pid}")
                for path in _args_paths(cmdline, cwd):
                    found.append(Candidate(path, f"argument of {proc.pid}"))
            except (psutil.Error, CallTimedOut, OSError) as exc:
                errors.append(f"cmdline of {proc.pid}: {exc}")
    return found, errors


def _stat_kind(path: str) -> dict:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {"exists": False}
    except OSError as exc:
        return {"exists": None, "error": f"{exc.strerror or exc}"}
    return {"exists": True, "isdir": stat.S_ISDIR(st.st_mode), "real": os.path.realpath(path)}


def resolve(paths: Sequence[str], timeout: float) -> Dict[str, dict]:
    """stat + realpath of every path, all in parallel daemon threads, all bounded by `timeout`.

    A path on a dead mount gives {"stalled": True}; its thread stays blocked in the kernel (NFS and
    FUSE waits are killable: it goes when the process exits)."""
    box: Dict[str, dict] = {}
    threads = []
    for path in dict.fromkeys(paths):

        def work(p: str = path) -> None:
            box[p] = _stat_kind(p)

        t = threading.Thread(target=work, name=f"stat:{path}", daemon=True)
        t.start()
        threads.append((path, t))
    deadline = time.monotonic() + timeout
    for _, t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return {path: box.get(path, {"stalled": True}) for path, _ in threads}


# --------------------------------------------------------------------------------------------
# The measurement, in a child
# --------------------------------------------------------------------------------------------

MEASURE_SCRIPT = r"""
import errno, json, os, sys, tempfile, time
def say(**kw):
    print("DEBUG_STUCK " + json.dumps(kw), flush=True)
d, size = sys.argv[1], int(sys.argv[2])
say(stage="statvfs")
t = time.monotonic()
st = os.statvfs(d)
say(stage="create", statvfs_s=round(time.monotonic() - t, 4), frsize=st.f_frsize, blocks=st.f_blocks,
    bavail=st.f_bavail, files=st.f_files, favail=st.f_favail, readonly_fs=bool(st.f_flag & os.ST_RDONLY))
try:
    fd, path = tempfile.mkstemp(prefix=".debug-stuck-", suffix=".tmp", dir=d)
except OSError as exc:
    say(stage="done", write_errno=errno.errorcode.get(exc.errno, str(exc.errno)), write_error=str(exc))
    sys.exit(0)
say(stage="write", tmp=path)
try:
    data = os.urandom(size)
    t0 = time.monotonic()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    t1 = time.monotonic()
    say(stage="fsync", write_s=round(t1 - t0, 4))
    os.fsync(fd)
    t2 = time.monotonic()
    say(stage="read", fsync_s=round(t2 - t1, 4))
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # read from the device, not the page cache
    os.lseek(fd, 0, os.SEEK_SET)
    got = 0
    while got < size:
        chunk = os.read(fd, size - got)
        if not chunk:
            break
        got += len(chunk)
    say(stage="remove", read_s=round(time.monotonic() - t2, 4), read_bytes=got)
except OSError as exc:
    say(write_errno=errno.errorcode.get(exc.errno, str(exc.errno)), write_error=str(exc))
finally:
    os.close(fd)
    os.unlink(path)
say(stage="done", removed=True)
"""


def measure_dir(directory: str, timeout: float, size: int = TEST_BYTES, prelude: str = "") -> dict:
    """statvfs + write/fsync/read of a temp file in `directory`, in a child killed at `timeout`.

    `prelude` is code run first in the child (tests use it to make one operation stall)."""
    script = prelude + "\n" + MEASURE_SCRIPT if prelude else MEASURE_SCRIPT
    argv = [sys.executable, "-I", "-S", "-c", script, directory, str(size)]
    result = run_bounded(argv, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, timeout)
    marks = child_marks(result.output_tail)
    marks["timed_out"] = result.timed_out
    marks["seconds"] = result.seconds
    if not result.timed_out and marks.get("stage") != "done":
        lines = [x for x in result.output_tail.splitlines() if x.strip() and not x.startswith("DEBUG_STUCK ")]
        marks["crash"] = lines[-1][:200] if lines else f"exit {result.returncode}"
    tmp = marks.get("tmp")
    if tmp and not marks.get("removed"):
        # killed between create and unlink: remove the file ourselves, bounded (the mount may be dead)
        try:
            call_with_timeout(lambda: os.unlink(tmp), 2.0, f"removing {tmp}")
            marks["removed"] = True
        except FileNotFoundError:
            marks["removed"] = True
        except (OSError, CallTimedOut) as exc:
            marks["remove_error"] = str(exc)
    return marks


# --------------------------------------------------------------------------------------------
# Judging
# --------------------------------------------------------------------------------------------


@dataclass
class DirReport:
    directory: str
    origins: List[str] = field(default_factory=list)
    checkpoint: bool = False
    mount: Optional[Mount] = None
    measure: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "directory": self.directory,
            "origins": self.origins,
            "checkpoint": self.checkpoint,
            "fstype": self.mount.fstype if self.mount else None,
            "mount_point": self.mount.point if self.mount else None,
            "source": self.mount.source if self.mount else None,
            "network": bool(self.mount and is_network_fs(self.mount.fstype)),
            "measure": self.measure,
        }


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def judge(reports: Sequence[DirReport], limit: float) -> List[Finding]:
    out: List[Finding] = []
    seen_mounts: Dict[int, List[DirReport]] = {}
    for rep in reports:
        if rep.mount is not None:
            seen_mounts.setdefault(rep.mount.mount_id, []).append(rep)

    # Per filesystem: network type, space, inodes (statvfs answers for the whole filesystem).
    for group in seen_mounts.values():
        mount = group[0].mount
        if mount is None:
            continue
        dirs = ", ".join(r.directory for r in group[:3]) + (f" (+{len(group) - 3})" if len(group) > 3 else "")
        ckpt = any(r.checkpoint for r in group)
        cause = "checkpoint-save" if ckpt else "io-stall"
        if is_network_fs(mount.fstype):
            opts = [o for o in mount.super_options + mount.options if o in ("hard", "soft") or o.startswith("timeo=")]
            extra = f" [{','.join(opts)}]" if opts else ""
            out.append(
                Finding(
                    "warn",
                    f"{dirs} is on {mount.fstype} ({mount.source} at {mount.point}{extra}): when the server stops "
                    "answering, reads and writes there block with no timeout",
                    cause,
                )
            )
        measured = next((r.measure for r in group if "frsize" in r.measure), None)
        if measured:
            frsize, blocks, bavail = measured["frsize"], measured["blocks"], measured["bavail"]
            total, free = frsize * blocks, frsize * bavail
            if blocks:
                if bavail == 0:
                    out.append(
                        Finding("fail", f"{dirs}: the filesystem is full (0 of {_gb(total)} free)", "checkpoint-save")
                    )
                elif free < LOW_FREE_BYTES or free / total < LOW_FREE_RATIO:
                    out.append(
                        Finding(
                            "warn",
                            f"{dirs}: only {_gb(free)} free of {_gb(total)} ({100 * free / total:.1f}%): "
                            "a checkpoint save can run out of space",
                            "checkpoint-save",
                        )
                    )
            files, favail = measured["files"], measured["favail"]
            if files:
                if favail == 0:
                    out.append(
                        Finding("fail", f"{dirs}: no free inodes: no new file can be created", "checkpoint-save")
                    )
                elif favail / files < LOW_FREE_RATIO:
                    out.append(
                        Finding(
                            "warn",
                            f"{dirs}: only {favail} of {files} inodes free ({100 * favail / files:.1f}%)",
                            "checkpoint-save",
                        )
                    )

    # Per directory: the write test.
    for rep in reports:
        m = rep.measure
        cause = "checkpoint-save" if rep.checkpoint else "io-stall"
        if m.get("missing"):
            out.append(Finding("warn", f"{rep.directory} does not exist ({', '.join(rep.origins)}): nothing to test"))
            continue
        if m.get("stalled"):
            out.append(
                Finding(
                    "fail",
                    f"{rep.directory}: looking the path up did not return within {m['stalled']:g} s: the filesystem "
                    "does not answer",
                    cause,
                )
            )
            continue
        if m.get("timed_out"):
            stage = m.get("stage", "start")
            what = {
                "statvfs": "statvfs (free space query)",
                "create": "creating a file",
                "write": f"writing {TEST_BYTES >> 20} MiB",
                "fsync": "fsync (flushing to storage)",
                "read": "reading back",
                "remove": "removing the test file",
            }.get(stage, "the test")
            out.append(
                Finding(
                    "fail",
                    f"{rep.directory}: {what} did not finish within {limit:g} s: I/O there is stalled",
                    "io-stall" if stage == "statvfs" else cause,
                )
            )
            continue
        if m.get("crash"):
            out.append(Finding("warn", f"{rep.directory}: the write test failed: {m['crash']}", cause))
            continue
        code = m.get("write_errno")
        if code in ("ENOSPC", "EDQUOT"):
            why = "no space left" if code == "ENOSPC" else "disk quota exceeded"
            out.append(
                Finding(
                    "fail", f"{rep.directory}: writing 1 MiB failed: {why} ({m.get('write_error')})", "checkpoint-save"
                )
            )
        elif code in ("EROFS", "EACCES", "EPERM") or m.get("readonly_fs"):
            why = "read-only filesystem" if code == "EROFS" or m.get("readonly_fs") else "not writable by this user"
            out.append(Finding("info", f"{rep.directory}: {why}: only read there (write latency not measured)"))
        elif code:
            out.append(Finding("warn", f"{rep.directory}: writing failed: {m.get('write_error')}", cause))
        else:
            total = sum(m.get(k) or 0.0 for k in ("write_s", "fsync_s", "read_s"))
            if total > SLOW_S:
                out.append(
                    Finding(
                        "warn",
                        f"{rep.directory}: 1 MiB write {m.get('write_s', 0):.2f} s + fsync {m.get('fsync_s', 0):.2f} s"
                        f" + read {m.get('read_s', 0):.2f} s = {total:.2f} s: slow storage",
                        cause,
                    )
                )
    return out


# --------------------------------------------------------------------------------------------
# The probe
# --------------------------------------------------------------------------------------------


def probe(
    timeout: float,
    *,
    paths: Sequence[str] = (),
    pids: Sequence[int] = (),
    cwd: Optional[str] = None,
    mountinfo: Optional[str] = None,
    prelude: str = "",
    progress: Callable[[str], None] = lambda message: None,
) -> ProbeResult:
    """`mountinfo` (text) replaces the live mount table, `prelude` runs first in each measuring
    child: both for tests."""
    started = time.monotonic()
    candidates = [Candidate(os.path.abspath(os.path.expanduser(p)), "--path") for p in paths]
    errors: List[str] = []
    if pids:
        found, errors = job_candidates(pids)
        candidates += found
    note = None
    if not candidates:
        if pids:
            gone = [e for e in errors if e.endswith("does not exist (it may have exited)")]
            if gone and len(gone) == len(errors):  # every process exited since the probe checked them
                raise TargetNotInspectable("; ".join(gone), "give the PID of a running process of the job")
            return ProbeResult(NAME, "skipped", "; ".join(errors) or "no path found", data={"errors": errors})
        here = cwd or os.getcwd()
        candidates = [Candidate(here, "current directory")]
        note = "no --path or --pid given: tested the current directory"
    # the job's own pseudo and system files say nothing about its storage; an explicit --path is kept
    candidates = [c for c in candidates if c.origin == "--path" or not c.path.startswith(_SKIP_PREFIXES)]

    if mountinfo is not None:
        mounts, mount_error = parse_mountinfo(mountinfo), None
    else:
        mounts, mount_error = read_mountinfo(pids[0] if pids else None)
    if mount_error:
        errors.append(mount_error)

    # 1. resolve (exists? directory? real path?), bounded
    resolve_limit = max(1.0, min(5.0, 0.15 * timeout))
    progress("resolving the job's paths")
    kinds = resolve([c.path for c in candidates if c.is_file is None], resolve_limit)
    by_dir: Dict[str, DirReport] = {}
    for c in candidates:
        info = kinds.get(c.path, {})
        if c.origin.startswith("argument") and not info.get("exists"):
            continue  # an argument that only looked like a path
        if info.get("exists") is False or info.get("stalled"):
            rep = by_dir.setdefault(c.path, DirReport(c.path))
            rep.measure = {"missing": True} if info.get("exists") is False else {"stalled": resolve_limit}
        else:
            isdir = info.get("isdir", c.is_file is False)
            base = info.get("real", c.path)
            directory = base if isdir else os.path.dirname(base)
            rep = by_dir.setdefault(directory, DirReport(directory))
        if c.origin not in rep.origins:
            rep.origins.append(c.origin)
        rep.checkpoint = rep.checkpoint or c.writes or bool(CHECKPOINT_NAME.search(c.path))
    reports = list(by_dir.values())
    skipped = reports[MAX_DIRS:]
    reports = reports[:MAX_DIRS]
    for rep in reports:
        rep.mount = mount_for(rep.directory, mounts) if not rep.measure.get("missing") else None

    # 2. measure each directory in parallel children, bounded
    left = timeout - (time.monotonic() - started)
    limit = max(1.0, min(15.0, left - 3.0))
    todo = [r for r in reports if not r.measure]
    progress(f"timing a 1 MiB write+fsync+read in {len(todo)} director{'y' if len(todo) == 1 else 'ies'}")
    threads = []
    for rep in todo:

        def work(r: DirReport = rep) -> None:
            r.measure = measure_dir(r.directory, limit, prelude=prelude)

        t = threading.Thread(target=work, name=f"measure:{rep.directory}", daemon=True)
        t.start()
        threads.append(t)
    deadline = time.monotonic() + limit + 4.0  # the runner's own 2 s kill grace plus cleanup
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    incomplete = [r for r in todo if not r.measure]

    findings = judge(reports, limit)
    if note:
        findings.append(Finding("info", note))
    if skipped:
        findings.append(Finding("info", f"{len(skipped)} more directories not tested (limit {MAX_DIRS})"))
    data = {
        "directories": [r.to_dict() for r in reports],
        "limit_s": limit,
        "errors": errors,
        "not_tested": [r.directory for r in skipped],
    }
    status = "timeout" if incomplete else worst_status(findings)
    top = [f for f in findings if f.severity == status]
    if incomplete:
        summary = f"{len(incomplete)} director{'y' if len(incomplete) == 1 else 'ies'} not measured in time"
    elif top and status != "ok":
        summary = top[0].message + (f" (+{len(top) - 1} more)" if len(top) > 1 else "")
    else:
        parts = []
        for r in reports:
            m = r.measure
            lat = sum(m.get(k) or 0.0 for k in ("write_s", "fsync_s", "read_s"))
            kind = r.mount.fstype if r.mount else "?"
            parts.append(f"{r.directory} ({kind}, {lat * 1000:.0f} ms)")
        summary = f"{len(reports)} director{'y' if len(reports) == 1 else 'ies'} ok: " + ", ".join(parts[:4])
    return ProbeResult(NAME, status, summary, data=data, findings=findings)


def run(ctx: ProbeContext) -> ProbeResult:
    return probe(ctx.timeout, paths=ctx.paths, pids=ctx.pids, cwd=ctx.cwd, progress=ctx.progress)
