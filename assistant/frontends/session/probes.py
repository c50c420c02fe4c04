"""Step 4 of the session: probes offered where the questions and causes name them, each run as
`debug-stuck probe NAME --format json` in a child process, so that a cancel really stops it (the
child and everything it started, by PID)."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

from debug_stuck.bounded import kill_tree, members_of, wait_ended

# A probe gets its own limit, the probe framework's clean-up grace, and this much for the
# interpreter to start, before it is killed.
PROBE_START_SECONDS = 15.0
PROBE_POLL_SECONDS = 0.1


@dataclass
class ProbeOffer:
    name: str
    summary: str
    runs_user_code: bool
    timeout: float
    available: bool
    why: str  # why it is offered here
    input_kind: Optional[str] = None  # command | factory | script | path
    input_prompt: Optional[str] = None
    safety: str = "reads"  # its declared safety label (contract.SAFETY_LABELS): what consent is for

    @property
    def input_optional(self) -> bool:
        """The probe works from the job's PIDs alone; the input only narrows it (probes.yaml says
        "(optional)" in the prompt)."""
        return self.input_kind is None or "(optional)" in (self.input_prompt or "")

    @property
    def safety_text(self) -> str:
        """What it does to this machine, in the words the report uses ("writes a temporary file")."""
        from debug_stuck.contract import SAFETY_LABELS

        if not self.available:
            return "not in this version"
        return "runs your code" if self.runs_user_code else SAFETY_LABELS.get(self.safety, self.safety)


@dataclass
class ProbeOutcome:
    name: str
    status: str  # ok | warn | fail | skipped | timeout (the probe's), or cancelled | error (ours)
    summary: str
    seconds: float = 0.0
    findings: List[dict] = field(default_factory=list)
    result: Optional[dict] = None  # ProbeResult.to_dict() when the probe answered

    @property
    def completed(self) -> bool:
        return self.result is not None and self.status not in ("timeout",)

    def one_line(self) -> str:
        return f"probe {self.name}: {self.status.upper()} ({self.seconds:.1f} s): {self.summary}"


def probe_offer(name: str, why: str = "") -> ProbeOffer:
    """What the session says about a probe, from its declaration (probes.yaml)."""
    from debug_stuck.probes.targeted.base import ProbeUsageError
    from debug_stuck.probes.targeted.registry import probe_spec

    try:
        spec = probe_spec(name)
    except ProbeUsageError:
        return ProbeOffer(name, "not available in this version", False, 0.0, False, why)
    kind, prompt = spec.ask if spec.ask else (None, None)
    return ProbeOffer(name, spec.summary, spec.runs_user_code, spec.timeout, True, why, kind, prompt, spec.safety)


def probe_argv(
    launcher: Sequence[str],
    offer: ProbeOffer,
    pids: Sequence[int],
    consent: bool,
    value: str,
    extra: Sequence[str] = (),
) -> List[str]:
    argv = [*launcher, "probe", offer.name, "--format", "json", "--timeout", f"{offer.timeout:g}", *extra]
    for pid in pids:
        argv += ["--pid", str(pid)]
    if consent:
        argv.append("--allow-exec")
    value = (value or "").strip()
    if value and offer.input_kind in ("factory", "script", "path"):
        argv += [f"--{offer.input_kind}", value]
    if value and offer.input_kind == "command":
        argv += ["--", *shlex.split(value)]
    return argv


def run_probe_child(
    argv: Sequence[str],
    name: str,
    limit: float,
    cwd: Optional[str],
    stop: Callable[[], bool],
    progress: Optional[Callable[[float], None]] = None,
) -> ProbeOutcome:
    """Run the probe's child until it answers, `stop()` says so, or `limit` passes; what is left of
    it is killed as a tree either way."""
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
        cwd=cwd or None,
    )
    out = err = ""
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=PROBE_POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if stop():
                    _end(proc)
                    return ProbeOutcome(name, "cancelled", "cancelled; nothing is left running", elapsed)
                if elapsed > limit:
                    _end(proc)
                    return ProbeOutcome(name, "timeout", f"no answer within {limit:.0f} s", elapsed)
                if progress is not None:
                    progress(elapsed)
    except BaseException:
        _end(proc)
        raise
    seconds = time.monotonic() - started
    try:
        result = json.loads(out)
    except ValueError:
        lines = [ln for ln in (err or "").splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit code {proc.returncode}, no output"
        return ProbeOutcome(name, "error", why.replace("debug-stuck: error: ", ""), seconds)
    return ProbeOutcome(
        name,
        str(result.get("status", "fail")),
        str(result.get("summary", "")),
        float(result.get("seconds", seconds)),
        list(result.get("findings", [])),
        result,
    )


# How long the probe's child gets to end what it started and remove its scratch folders itself.
PROBE_TERM_GRACE = 5.0


def _end(proc: subprocess.Popen) -> None:
    """The probe's child and everything under it, by PID (its commands run in sessions of their own).
    SIGTERM first, so the child ends its own tree and removes its scratch folders; then SIGKILL to
    whatever is left, found before the child could exit (create times guard against reused PIDs)."""
    known: dict = {}
    if proc.poll() is None:
        members_of(proc.pid, known)
        try:
            proc.send_signal(signal.SIGTERM)
        except OSError:
            pass
        # not proc.wait(): the child must stay unreaped until kill_tree, so its PID is not reused
        if not wait_ended(proc.pid, PROBE_TERM_GRACE):
            members_of(proc.pid, known)
    kill_tree(proc.pid, known)
    try:
        proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, OSError, ValueError):
        pass
