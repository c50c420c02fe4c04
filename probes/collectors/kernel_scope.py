"""Which kernel log lines belong to the job being diagnosed: the judgement, pure over a line and the
job's marks (debug_stuck.live.kernel_scope builds the marks from a snapshot; a probe builds them
from the PIDs it was given).

Training nodes are shared: an OOM kill of another user's process, an Xid on a GPU the job does not
use, or a hung task from yesterday says nothing about this job. A kernel line is evidence only when
it names a process of the job (its PID, or its cgroup), a GPU the job uses, or an NFS server the job
has mounted, and falls within the job's lifetime. Every other flagged line is context, reported with
why it was not counted.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Set, Tuple

# Before the job's first process existed, a little slack for the coarse clocks of `dmesg -T`.
START_SLACK = 2.0

_DMESG_T = re.compile(r"^\[(?P<when>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]")
_DMESG_UPTIME = re.compile(r"^\[\s*(?P<secs>\d+\.\d+)\]")
_SYSLOG = re.compile(r"^(?P<when>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)(?:\.\d+)? \S+ kernel:")
_ISO = re.compile(r"^(?P<when>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(?P<tz>[+-]\d\d:?\d\d|Z)? \S+ kernel:")

# What a kernel line names. The forms are the kernel's own (mm/oom_kill.c, kernel/hung_task.c,
# arch/x86/mm/fault.c show_signal_msg) and NVIDIA's Xid format (NVRM: Xid (PCI:bus): N, pid=P, name=C).
_PIDS = (
    re.compile(r"\bKill(?:ed)? process (?P<pid>\d+) \((?P<comm>[^)]*)\)"),
    re.compile(r"\boom_reaper: reaped process (?P<pid>\d+) \((?P<comm>[^)]*)\)"),
    re.compile(r"\btask=(?P<comm>[^,\s]+),pid=(?P<pid>\d+)"),
    re.compile(r"\bpid=(?P<pid>\d+)(?:, name=(?P<comm>[^,\s]+))?"),
    re.compile(r"\btask (?P<comm>\S+):(?P<pid>\d+) blocked for more than"),
    re.compile(r"\b(?P<comm>[\w.-]+)\[(?P<pid>\d+)\]: segfault at"),
    re.compile(r"\btraps: (?P<comm>[\w.-]+)\[(?P<pid>\d+)\]"),
    re.compile(r"\bprocess (?P<comm>\S+) pid (?P<pid>\d+) thread"),
    re.compile(r"\bPID: (?P<pid>\d+) Comm: (?P<comm>\S+)"),
)
_MEMCG = re.compile(r"\btask_memcg=(?P<cg>[^,\s]+)")
_NVIDIA_BUS = re.compile(r"NVRM: Xid \(PCI:(?P<bus>[0-9a-fA-F:.]+)\)")
_AMD_BUS = re.compile(r"\bamdgpu (?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b")
_NFS_SERVER = re.compile(r"\b(?:nfs|lockd): server (?P<server>\S+) (?:not responding|OK)")


@dataclass
class JobScope:
    """What marks a kernel line as this job's."""

    pids: Set[int] = field(default_factory=set)
    started_at: Optional[float] = None  # epoch seconds of the job's oldest process
    cgroups: Set[str] = field(default_factory=set)
    gpu_busids: Set[str] = field(default_factory=set)  # normalized: domain:bus:device
    nfs_servers: Set[str] = field(default_factory=set)


@dataclass
class KernelVerdict:
    line: str
    kind: str
    belongs: bool
    why: str  # for a context line: why it does not count against the job


def normalize_busid(busid: str) -> str:
    """'00000000:3B:00.0', '0000:3b:00', '3b:00.0' -> '0000:3b:00'."""
    parts = busid.strip().lower().split(":")
    if len(parts) < 2:
        return busid.lower()
    if len(parts) == 2:
        parts = ["0000", *parts]
    domain = parts[0][-4:].rjust(4, "0")
    bus = parts[1][-2:].rjust(2, "0")
    device = parts[2].split(".")[0][-2:].rjust(2, "0")
    return f"{domain}:{bus}:{device}"


def line_time(line: str, boot_time: Optional[float], now: Optional[float] = None) -> Optional[float]:
    """When the kernel logged the line (epoch seconds), from the formats dmesg -T, plain dmesg,
    journalctl -o short-precise and kern.log print; None when the line does not say."""
    now = time.time() if now is None else now
    m = _DMESG_T.match(line)
    if m:
        return _parse_local(m.group("when"), "%a %b %d %H:%M:%S %Y")
    m = _ISO.match(line)
    if m:
        return _parse_iso(m.group("when"), m.group("tz"))
    m = _SYSLOG.match(line)
    if m:
        return _without_year(m.group("when"), now)
    m = _DMESG_UPTIME.match(line)
    if m and boot_time is not None:
        return boot_time + float(m.group("secs"))
    return None


def _parse_local(text: str, fmt: str) -> Optional[float]:
    try:
        return time.mktime(time.strptime(" ".join(text.split()), fmt))
    except (ValueError, OverflowError):
        return None


def _parse_iso(text: str, tz: Optional[str]) -> Optional[float]:
    from datetime import datetime, timezone

    try:
        when = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    if not tz:
        return time.mktime(when.timetuple())
    if tz == "Z":
        return when.replace(tzinfo=timezone.utc).timestamp()
    sign = 1 if tz[0] == "+" else -1
    digits = tz[1:].replace(":", "")
    from datetime import timedelta

    offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return when.replace(tzinfo=timezone(sign * offset)).timestamp()


def _without_year(text: str, now: float) -> Optional[float]:
    """Syslog's 'Nov 26 00:16:13' has no year: this year, or last year when that would be the future."""
    year = time.localtime(now).tm_year
    for candidate in (year, year - 1):
        when = _parse_local(f"{text} {candidate}", "%b %d %H:%M:%S %Y")
        if when is not None and when <= now + 60:
            return when
    return None


def named_pids(line: str) -> List[int]:
    out = []
    for pattern in _PIDS:
        for m in pattern.finditer(line):
            out.append(int(m.group("pid")))
    return list(dict.fromkeys(out))


def _under(cgroup: str, job_cgroups: Set[str]) -> bool:
    # The root cgroup and a whole user slice hold unrelated processes: they mark nothing.
    for job in job_cgroups:
        if job in ("/", "") or re.fullmatch(r"/user\.slice(/user-\d+\.slice)?", job):
            continue
        if cgroup == job or cgroup.startswith(job.rstrip("/") + "/"):
            return True
    return False


def judge_line(line: str, kind: str, scope: JobScope, boot_time: Optional[float], now: float) -> KernelVerdict:
    when = line_time(line, boot_time, now)
    if when is not None and scope.started_at is not None and when < scope.started_at - START_SLACK:
        ago = scope.started_at - when
        return KernelVerdict(line, kind, False, f"logged {_ago(ago)} before the job started")
    bus = _NVIDIA_BUS.search(line) or _AMD_BUS.search(line)
    if bus and normalize_busid(bus.group("bus")) in scope.gpu_busids:
        return KernelVerdict(line, kind, True, "a GPU the job uses")
    pids = named_pids(line)
    if pids:
        if any(pid in scope.pids for pid in pids):
            return KernelVerdict(line, kind, True, "names a process of the job")
        m = _MEMCG.search(line)
        if m and when is not None and _under(m.group("cg"), scope.cgroups):
            return KernelVerdict(line, kind, True, "a process in the job's cgroup")
    if bus:
        if not scope.gpu_busids:
            return KernelVerdict(line, kind, False, "a GPU of this machine; which GPUs the job uses is not known")
        return KernelVerdict(line, kind, False, "a GPU the job does not use")
    if pids:
        return KernelVerdict(line, kind, False, f"about pid {', '.join(map(str, pids))}, not a process of the job")
    server = _NFS_SERVER.search(line)
    if server:
        if server.group("server") in scope.nfs_servers and when is not None:
            return KernelVerdict(line, kind, True, "an NFS server the job has mounted")
        return KernelVerdict(line, kind, False, "an NFS server the job does not use")
    if when is None:
        return KernelVerdict(line, kind, False, "names no process or GPU of the job, and no time")
    return KernelVerdict(line, kind, False, "on this machine during the job, naming no process or GPU of it")


def judge_lines(
    tagged: List[Tuple[str, str]], scope: JobScope, boot_time: Optional[float], now: Optional[float] = None
) -> List[KernelVerdict]:
    """Each (kind, line) the kernel collector flagged, judged against the job."""
    now = time.time() if now is None else now
    return [judge_line(line, kind, scope, boot_time, now) for kind, line in tagged]


def _ago(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def gpu_busids_of(gpus, pids) -> Set[str]:
    """The PCI addresses (normalized) of the GPUs on which these processes hold memory."""
    if gpus is None or not getattr(gpus, "available", False):
        return set()
    pids = set(pids)
    used = {gp.gpu_index for gp in gpus.processes if gp.pid in pids}
    return {normalize_busid(d.busid) for d in gpus.devices if d.index in used and d.busid}


# (kind, line, boot time) -> (belongs to the job, why not)
KernelJudge = Callable[[str, str, Optional[float]], Tuple[bool, str]]


def scope_of_processes(procs, gpus=None, nfs_servers=(), also=()) -> JobScope:
    """The job's marks from its processes (ProcInfo): their PIDs (and `also`), when the oldest
    started, their cgroups, the GPUs they hold memory on, the NFS servers mounted where they run."""
    pids = {p.pid for p in procs} | set(also)
    starts = [p.create_time for p in procs if p.create_time]
    return JobScope(
        pids=pids,
        started_at=min(starts) if starts else None,
        cgroups={p.cgroup for p in procs if getattr(p, "cgroup", None)},
        gpu_busids=gpu_busids_of(gpus, pids),
        nfs_servers=set(nfs_servers or []),
    )


def judge_with(scope: JobScope) -> KernelJudge:
    """A judge of kernel lines, (kind, line, boot time) -> (belongs, why not), for this job."""

    def belongs(kind: str, line: str, boot_time: Optional[float]) -> Tuple[bool, str]:
        verdict = judge_line(line, kind, scope, boot_time, time.time())
        return verdict.belongs, verdict.why

    return belongs


def judge_for_pids(pids, gpus=None) -> KernelJudge:
    """The judge for the job the given PIDs belong to (their processes read bounded)."""
    from debug_stuck.probes.collectors.procs import InspectError, job_processes

    try:
        procs = job_processes(list(pids))
    except InspectError:
        procs = []
    return judge_with(scope_of_processes(procs, gpus, also=pids))
