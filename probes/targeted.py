"""Targeted probes: the checks an expert runs next, each bounded in time and safe.

A probe is a module `probes/check_<name>.py` exposing:
    NAME: str                 the probe's name (as `debug-stuck probe NAME` takes it)
    SUMMARY: str              one line for `probe --list`
    DEFAULT_TIMEOUT: float    seconds
    RUNS_USER_CODE: bool      True when it runs the user's code or command (needs consent)
    def run(ctx: ProbeContext) -> ProbeResult
The registry below is the list of probes; modules load lazily, when a probe is run.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from probes.bounded import CallTimedOut, call_with_timeout

STATUSES = ("ok", "warn", "fail", "skipped", "timeout")

REGISTRY: Dict[str, str] = {
    "nccl-debug-run": "probes.check_nccl",
    "dataloader": "probes.check_dataloader",
    "gc": "probes.check_gc",
    "gpu-health": "probes.check_gpu_health",
    "miopen": "probes.check_miopen",
    "storage": "probes.check_storage",
    "env": "probes.check_env",
}

# Time a probe gets on top of its own limit to kill what it started and write its result.
CLEANUP_GRACE = 10.0


@dataclass
class Finding:
    severity: str  # info | warn | fail
    message: str
    cause: Optional[str] = None  # the playbook (cause id) this finding belongs to

    def to_dict(self) -> dict:
        out = {"severity": self.severity, "message": self.message}
        if self.cause:
            out["cause"] = self.cause
        return out


@dataclass
class ProbeResult:
    name: str
    status: str
    summary: str
    data: dict = field(default_factory=dict)
    findings: List[Finding] = field(default_factory=list)
    seconds: float = 0.0

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


def probe_module(name: str):
    if name not in REGISTRY:
        raise ProbeUsageError(f"no probe {name!r}; valid: {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[name])


def list_probes() -> List[dict]:
    out = []
    for name in REGISTRY:
        module = probe_module(name)
        out.append(
            {
                "name": name,
                "summary": module.SUMMARY,
                "timeout": module.DEFAULT_TIMEOUT,
                "runs_user_code": module.RUNS_USER_CODE,
            }
        )
    return out


def run_probe(name: str, ctx: ProbeContext) -> ProbeResult:
    """Run one probe with its bound. Never raises for what the probe finds; raises
    ProbeUsageError for bad input and ConsentRequired when user code may not be run."""
    module = probe_module(name)
    if module.RUNS_USER_CODE and not ctx.allow_exec:
        raise ConsentRequired(f"probe {name!r} runs your code; give --allow-exec to consent (nothing was run)")
    started = time.monotonic()
    try:
        result = call_with_timeout(lambda: module.run(ctx), ctx.timeout + CLEANUP_GRACE, what=f"probe {name}")
    except CallTimedOut:
        result = ProbeResult(
            name, "timeout", f"did not finish within {ctx.timeout:g} s (plus {CLEANUP_GRACE:g} s to clean up)"
        )
    except ProbeUsageError:
        raise
    except Exception as exc:  # a probe bug still yields a result, not a traceback
        result = ProbeResult(name, "fail", f"the probe itself failed: {type(exc).__name__}: {exc}")
    result.seconds = time.monotonic() - started
    if result.status not in STATUSES:
        result.status = "fail"
    return result
