"""What every targeted probe takes and gives: its context (inputs, limit, consent), its findings and
its result, each finding tied to the playbook (cause id) it is evidence for."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Callable, List, Optional

from debug_stuck.errors import NotInspectable
from debug_stuck.probes.collectors.kernel_scope import KernelJudge

STATUSES = ("ok", "warn", "fail", "skipped", "timeout")
# Where the kernel says it killed a process for memory: the check every SIGKILL points at.
OOM_CHECK = "`dmesg -T | grep -i -E 'killed process|out of memory'`"


def signal_name(number: int) -> str:
    """SIGKILL for 9; "signal N" for a number with no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class Finding:
    severity: str  # info | warn | fail
    message: str
    cause: Optional[str] = None  # the playbook (cause id) this finding belongs to
    see: Optional[str] = None  # a playbook to read, where the finding is no evidence for it (an info note)

    def to_dict(self) -> dict:
        out = {"severity": self.severity, "message": self.message}
        if self.cause:
            out["cause"] = self.cause
        if self.see:
            out["see"] = self.see
        return out


@dataclass
class ProbeResult:
    name: str
    status: str
    summary: str
    data: dict = field(default_factory=dict)
    findings: List[Finding] = field(default_factory=list)
    seconds: float = 0.0

    @classmethod
    def from_dict(cls, data: dict) -> ProbeResult:
        """A result as `to_dict` gave it (a probe run earlier, in another process)."""
        findings = [
            Finding(str(f.get("severity", "info")), str(f.get("message", "")), f.get("cause"), f.get("see"))
            for f in data.get("findings") or []
            if isinstance(f, dict)
        ]
        return cls(
            str(data.get("name", "?")),
            str(data.get("status", "fail")),
            str(data.get("summary", "")),
            dict(data.get("data") or {}),
            findings,
            float(data.get("seconds") or 0.0),
        )

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "seconds": round(self.seconds, 2),
            "findings": [f.to_dict() for f in self.findings],
            "data": self.data,
        }

    def fact_lines(self) -> List[str]:
        """What the classifier matches `probe` signals against (see skills/README.md)."""
        lines = [f"probe={self.name} status={self.status} {self.summary}"]
        lines += [
            f"probe={self.name} finding={f.severity} cause={f.cause or 'none'} {f.message}" for f in self.findings
        ]
        return lines


@dataclass
class ProbeContext:
    timeout: float
    allow_exec: bool = False
    command: List[str] = field(default_factory=list)  # the user's launch command (after --)
    pids: List[int] = field(default_factory=list)
    paths: List[str] = field(default_factory=list)
    factory: Optional[str] = None  # module:function returning a Dataset or DataLoader
    script: Optional[str] = None
    num_workers: Optional[int] = None
    batches: int = 5
    cwd: Optional[str] = None
    progress: Callable[[str], None] = lambda message: None
    # Whether a kernel log line belongs to the job being diagnosed: (kind, line, boot time) ->
    # (belongs, why not). None when there is no job (a probe of the machine as a whole).
    kernel_judge: Optional[KernelJudge] = None


def worst_status(findings: List[Finding]) -> str:
    """A probe's status from its findings: fail beats warn beats ok."""
    for level in ("fail", "warn"):
        if any(f.severity == level for f in findings):
            return level
    return "ok"


class ProbeUsageError(Exception):
    """Bad probe name or missing input; the message says what is valid."""


class ConsentRequired(ProbeUsageError):
    """The probe runs the user's code and consent (--allow-exec) was not given."""


class TargetNotInspectable(NotInspectable):
    """A process the probe was given (--pid) is gone, or may not be read: exit 3, as for every
    command whose target could not be inspected. The message names the PID; the hint says what to do."""
