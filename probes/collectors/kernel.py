"""The kernel log, bounded in time, and the lines of it that matter for a hung training job.

Sources, in order: ``dmesg -T`` (plain ``dmesg`` where -T is not supported), then
``journalctl -k``, then the tail of ``/var/log/kern.log``. In containers dmesg is often not
permitted (``kernel.dmesg_restrict``) and there is no journal: the result then carries a clear
error with the way to grant access, never an exception. Every command runs through a runner (the
seam; ``debug_stuck.bounded.run_command`` by default) under one shared deadline.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from debug_stuck.bounded import CallTimedOut, CommandResult, call_with_timeout, run_command

KERN_LOG = "/var/log/kern.log"
# Bytes read from the end of kern.log per wanted line (kernel lines are rarely longer).
_BYTES_PER_LINE = 256

Runner = Callable[[Sequence[str], float], CommandResult]


@dataclass
class KernelLog:
    lines: List[str] = field(default_factory=list)
    source: Optional[str] = None  # "dmesg" | "journalctl" | "/var/log/kern.log" | None
    error: Optional[str] = None  # set when no source could be read
    notes: List[str] = field(default_factory=list)  # sources tried before the one that worked
    boot_time: Optional[float] = None  # epoch seconds of boot (/proc/stat btime): dates plain dmesg's uptime stamps

    @property
    def ok(self) -> bool:
        return self.source is not None

    def interesting(self) -> List[str]:
        return interesting(self.lines)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["interesting"] = self.interesting()
        return data


# --------------------------------------------------------------------------------------------
# What matters for hangs: (kind, pattern). Searched, not anchored, one line at a time.
# --------------------------------------------------------------------------------------------

_PATTERNS: List[Tuple[str, str]] = [
    # NVIDIA driver: Xid events (13, 31, 43, 48, 63, 64, 74, 79, 94, 95 ...) and a GPU off the bus.
    ("nvidia-xid", r"NVRM: Xid \("),
    ("nvidia-bus", r"NVRM: .*fallen off the bus|NVRM: .*RmInitAdapter failed|NVRM: .*GPU crash dump"),
    # amdgpu: job/ring timeouts, resets, errors, page faults, RAS.
    ("amdgpu-timeout", r"amdgpu_job_timedout|amdgpu.*\bring \S+ timeout\b|amdgpu.*[Ff]ence fallback timer expired"),
    (
        "amdgpu-reset",
        r"amdgpu.*(?:GPU reset|[Rr]ing \S+ reset|\bring reset\b|GPU [Rr]ecovery|MODE\d reset|device wedged"
        r"|reset (?:begin|succeeded|failed))",
    ),
    ("amdgpu-error", r"\[drm:\S*amdgpu\S* \[amdgpu\]\] \*ERROR\*|amdgpu.*\bMES failed to respond"),
    ("amdgpu-fault", r"amdgpu.*(?:retry page fault|page fault \(src_id|VM_L2_PROTECTION_FAULT)"),
    (
        "amdgpu-ras",
        r"amdgpu.*(?:\bRAS\b.*(?:error|poison|uncorrect|correct)|uncorrectable|[Pp]oison|bad page|ECC error)",
    ),
    # A driver's work item monopolizing a CPU (amdgpu KFD userptr / SVM restore; nvidia).
    ("workqueue-hog", r"workqueue: \S+ \[(?:amdgpu|nvidia\w*)\] hogged CPU"),
    # Host memory.
    ("oom", r"Out of memory: Kill|invoked oom-killer|oom-kill:|Memory cgroup out of memory"),
    # Tasks stuck in the kernel (D state), lockups, RCU stalls.
    ("hung-task", r"blocked for more than \d+ seconds|\bhung_task\b|\btask \S+:\d+ blocked\b"),
    ("lockup", r"soft lockup|hard LOCKUP|rcu\S*: INFO: rcu_\w+ (?:self-)?detected stall|detected stalls on CPUs"),
    # Network filesystems.
    ("nfs", r"\bnfs: server \S+ not responding|\blockd: server \S+ not responding"),
    # The training process itself crashing.
    ("crash", r"\b(?:python[\w.]*|pt_\w+|torchrun)\[\d+\]: segfault at|traps: (?:python[\w.]*|pt_\w+)\[\d+\]"),
    ("bus-error", r"\bBus error\b"),
    # Interconnect: Mellanox/InfiniBand and NIC link loss, TX watchdog.
    (
        "network",
        r"mlx5_core.*(?:[Ll]ink down|[Ll]ink DOWN|health compromised|[Ff]atal|syndrome|Cable unplugged|timeout)"
        r"|\bNIC Link is Down\b|\bLink is Down\b|: Link down\b|NETDEV WATCHDOG",
    ),
    # Machine checks, memory ECC (EDAC), PCIe AER.
    (
        "hardware-error",
        r"\[Hardware Error\]|mce: .*(?:Machine check|CPU \d+: Machine Check)|Machine check events logged"
        r"|EDAC \S+: .*(?:\bUE\b|\bCE\b|[Ee]rror)|AER: .*(?:Uncorrected|Fatal)",
    ),
]

INTERESTING: List[Tuple[str, re.Pattern]] = [(kind, re.compile(rx)) for kind, rx in _PATTERNS]


def classify(line: str) -> Optional[str]:
    """The kind of the first pattern that matches `line`, or None."""
    for kind, pattern in INTERESTING:
        if pattern.search(line):
            return kind
    return None


def interesting(lines: Iterable[str]) -> List[str]:
    """Only the kernel log lines that matter for a hang, in their order."""
    return [line for line in lines if classify(line) is not None]


def interesting_tagged(lines: Iterable[str]) -> List[Tuple[str, str]]:
    """(kind, line) for every interesting line."""
    out = []
    for line in lines:
        kind = classify(line)
        if kind is not None:
            out.append((kind, line))
    return out


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

_NOT_PERMITTED = re.compile(r"Operation not permitted|Permission denied|not permitted", re.I)
_BAD_OPTION = re.compile(r"invalid option|unrecognized option|unknown option|illegal option|usage:", re.I)
_DMESG_HINT = "run as root or set kernel.dmesg_restrict=0"
_JOURNAL_HINT = "run as root or add the user to the adm or systemd-journal group"
# journalctl's own remarks on stdout, not kernel lines
_JOURNAL_CHATTER = re.compile(r"^(?:-- |No journal files were found|Hint: )")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _tail(text: str, max_lines: int) -> List[str]:
    lines = [line.rstrip("\r") for line in text.splitlines() if line.strip()]
    return lines[-max_lines:] if max_lines > 0 else []


def boot_time() -> Optional[float]:
    """When this machine booted (epoch seconds), from /proc/stat's btime; None when unreadable."""
    try:
        text = call_with_timeout(lambda: _read_tail("/proc/stat", 1 << 20), 1.0, "/proc/stat")
    except (OSError, CallTimedOut):
        return None
    for line in text.splitlines():
        if line.startswith("btime "):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def read_kernel_log(
    max_lines: int = 2000,
    timeout: float = 3.0,
    runner: Runner = run_command,
    kern_log: str = KERN_LOG,
) -> KernelLog:
    """The last `max_lines` kernel log lines, from the first source that works within `timeout` s."""
    log = _read_kernel_log(max_lines, timeout, runner, kern_log)
    log.boot_time = boot_time()
    return log


def _read_kernel_log(max_lines: int, timeout: float, runner: Runner, kern_log: str) -> KernelLog:
    deadline = time.monotonic() + max(timeout, 0.1)
    reasons: List[str] = []

    def remaining() -> float:
        return deadline - time.monotonic()

    def run(argv: Sequence[str]) -> Optional[CommandResult]:
        """None (with a reason) when the program is missing, out of time, or the runner misbehaves."""
        left = remaining()
        if left <= 0.05:
            reasons.append(f"{argv[0]}: not tried, the {timeout:g} s budget was spent")
            return None
        try:
            # run_command is bounded itself; the extra bound protects against any runner.
            result = call_with_timeout(lambda: runner(list(argv), left), left + 1.0, argv[0])
        except FileNotFoundError:
            reasons.append(f"{argv[0]}: not installed")
            return None
        except CallTimedOut:
            reasons.append(f"{argv[0]}: did not finish within {timeout:g} s")
            return None
        except Exception as exc:
            reasons.append(f"{argv[0]}: {type(exc).__name__}: {exc}")
            return None
        if result.timed_out:
            reasons.append(f"{argv[0]}: did not finish within {timeout:g} s (the kernel or the journal is stuck?)")
            return None
        return result

    # 1. dmesg -T, plain dmesg where -T is not supported (busybox, old util-linux)
    result = run(["dmesg", "-T"])
    if result is not None and result.returncode != 0 and _BAD_OPTION.search(result.stderr or ""):
        result = run(["dmesg"])
    if result is not None:
        if result.returncode == 0:
            return KernelLog(lines=_tail(result.stdout, max_lines), source="dmesg", notes=reasons)
        why = _first_line(result.stderr) or f"exited with {result.returncode}"
        if not why.startswith("dmesg"):
            why = f"dmesg: {why}"
        if _NOT_PERMITTED.search(why):
            why = f"{why} ({_DMESG_HINT})"
        reasons.append(why)

    # 2. journalctl -k
    result = run(["journalctl", "-k", "-n", str(max_lines), "--no-pager", "-o", "short-precise"])
    if result is not None:
        lines = [line for line in _tail(result.stdout, max_lines) if not _JOURNAL_CHATTER.match(line)]
        if result.returncode == 0 and lines:
            return KernelLog(lines=lines, source="journalctl", notes=reasons)
        stderr = _first_line(result.stderr)
        if result.returncode != 0:
            why = f"journalctl: {stderr or f'exited with {result.returncode}'}"
        elif _NOT_PERMITTED.search(result.stderr or "") or "not seeing messages" in (result.stderr or ""):
            why = f"journalctl: no kernel messages visible ({_JOURNAL_HINT})"
        else:
            why = "journalctl: no kernel messages in the journal" + (f" ({stderr})" if stderr else "")
        if _NOT_PERMITTED.search(why) and _JOURNAL_HINT not in why:
            why = f"{why} ({_JOURNAL_HINT})"
        reasons.append(why)

    # 3. the tail of /var/log/kern.log
    left = remaining()
    if left <= 0.05:
        reasons.append(f"{kern_log}: not tried, the {timeout:g} s budget was spent")
    else:
        try:
            text = call_with_timeout(lambda: _read_tail(kern_log, max_lines * _BYTES_PER_LINE), left, kern_log)
            return KernelLog(lines=_tail(text, max_lines), source=kern_log, notes=reasons)
        except FileNotFoundError:
            reasons.append(f"{kern_log}: not found")
        except PermissionError:
            reasons.append(f"{kern_log}: permission denied (run as root or add the user to the adm group)")
        except CallTimedOut:
            reasons.append(f"{kern_log}: reading did not finish within {timeout:g} s")
        except OSError as exc:
            reasons.append(f"{kern_log}: {exc.strerror or exc}")

    return KernelLog(lines=[], source=None, error="could not read the kernel log: " + "; ".join(reasons))


def _read_tail(path: str, max_bytes: int) -> str:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - max_bytes)
        fh.seek(start)
        data = fh.read(max_bytes)
    if start > 0:  # drop the partial first line
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data.decode("utf-8", errors="replace")
