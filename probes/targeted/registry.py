"""Targeted probes: the checks an expert runs next, each bounded in time and safe.

What probes exist, and what each needs, is data: `skills/data/probes.yaml` (name, module,
summary, time limit, whether it runs the user's code, its inputs, the modes in which it does
something else, examples). A probe's module, loaded lazily when it runs, exposes `NAME` and
`run(ctx: ProbeContext) -> ProbeResult`.

Before a probe runs, `run_probe` checks what every probe shares: consent for the mode its inputs
select, `batches` and `num_workers` in range, and every `--pid` alive (a PID that is gone, or was
never there, raises `TargetNotInspectable`: exit 3, like every command whose target is gone).
"""

from __future__ import annotations

import importlib
import textwrap
import time
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

import psutil

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.contract import SAFETY_LABELS
from debug_stuck.probes.targeted.base import (
    STATUSES,
    ConsentRequired,
    ProbeContext,
    ProbeResult,
    ProbeUsageError,
    TargetNotInspectable,
)

INPUTS = ("pid", "path", "factory", "script", "command", "num_workers", "batches")


@dataclass(frozen=True)
class ProbeMode:
    """What a probe is when the inputs given are all among `when` (gc with --pid alone only reads)."""

    name: str
    when: Tuple[str, ...]
    runs_user_code: bool
    safety: str
    safety_note: str

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "when": list(self.when),
            "runs_user_code": self.runs_user_code,
            "safety": {"label": self.safety, "text": SAFETY_LABELS[self.safety], "note": self.safety_note},
        }


@dataclass(frozen=True)
class ProbeSpec:
    """One probe as probes.yaml declares it."""

    name: str
    module: str  # the module that implements it (fully qualified)
    summary: str
    timeout: float
    runs_user_code: bool
    inputs: Tuple[str, ...] = ()
    ask: Optional[Tuple[str, str]] = None  # (input, prompt) the interactive session asks for
    safety: str = "reads"  # a key of contract.SAFETY_LABELS
    safety_note: str = ""
    modes: Tuple[ProbeMode, ...] = ()
    examples: Tuple[str, ...] = ()
    details: str = ""  # more on what it does, for `probe NAME --help`

    def load(self):
        return importlib.import_module(self.module)

    def mode_for(self, given: Iterable[str]) -> Optional[ProbeMode]:
        """The declared mode these inputs select, or None (the probe's own entries apply)."""
        given = set(given)
        for mode in self.modes:
            if given and given <= set(mode.when):
                return mode
        return None

    def runs_user_code_with(self, given: Iterable[str]) -> bool:
        """Whether the probe runs the user's code with these inputs (so needs consent)."""
        mode = self.mode_for(given)
        return mode.runs_user_code if mode is not None else self.runs_user_code

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "summary": self.summary,
            "timeout": self.timeout,
            "runs_user_code": self.runs_user_code,
            "inputs": list(self.inputs),
            "safety": {"label": self.safety, "text": SAFETY_LABELS[self.safety], "note": self.safety_note},
            "modes": [m.to_dict() for m in self.modes],
            "examples": list(self.examples),
        }


def load_declarations(data: Optional[dict] = None) -> Dict[str, ProbeSpec]:
    """The probes of skills/data/probes.yaml, checked; a malformed one raises ValueError naming the field."""
    from debug_stuck.kb import PROBES_TABLE, load_table

    data = load_table(PROBES_TABLE) if data is None else data
    out: Dict[str, ProbeSpec] = {}
    for name, entry in (data or {}).get("probes", {}).items():
        where = f"{PROBES_TABLE}: probes.{name}"
        try:
            inputs = tuple(entry.get("inputs") or ())
            unknown = [i for i in inputs if i not in INPUTS]
            if unknown:
                raise ValueError(f"{where}.inputs: unknown {unknown}; valid: {', '.join(INPUTS)}")
            safety = entry.get("safety")
            if safety not in SAFETY_LABELS or not entry.get("safety_note"):
                raise ValueError(f"{where}.safety: one of {', '.join(SAFETY_LABELS)}, with a safety_note")
            ask = entry.get("ask")
            if ask is not None and ask.get("input") not in inputs:
                raise ValueError(f"{where}.ask: asks for an input the probe does not declare")
            modes = []
            for mode_name, mode in (entry.get("modes") or {}).items():
                when = tuple(mode.get("when") or ())
                if not when or any(i not in inputs for i in when):
                    raise ValueError(f"{where}.modes.{mode_name}.when: a list of the probe's inputs ({inputs})")
                if mode.get("safety") not in SAFETY_LABELS or not mode.get("safety_note"):
                    raise ValueError(
                        f"{where}.modes.{mode_name}.safety: one of {', '.join(SAFETY_LABELS)}, with a safety_note"
                    )
                modes.append(
                    ProbeMode(mode_name, when, bool(mode["runs_user_code"]), mode["safety"], str(mode["safety_note"]))
                )
            examples = tuple(str(e) for e in entry.get("examples") or ())
            bad = [e for e in examples if not e.startswith(f"debug-stuck probe {name}")]
            if bad:
                raise ValueError(f"{where}.examples: each starts with 'debug-stuck probe {name}': {bad[0]!r}")
            out[name] = ProbeSpec(
                name=name,
                module=f"{__package__}.{entry['module']}",
                summary=str(entry["summary"]),
                timeout=float(entry["timeout"]),
                runs_user_code=bool(entry["runs_user_code"]),
                inputs=inputs,
                ask=(ask["input"], str(ask["prompt"])) if ask else None,
                safety=safety,
                safety_note=str(entry["safety_note"]),
                modes=tuple(modes),
                examples=examples,
                details=" ".join(str(entry.get("details") or "").split()),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{where}: missing or malformed {exc}") from None
    return out


REGISTRY: Dict[str, ProbeSpec] = load_declarations()
PROBE_NAMES = tuple(REGISTRY)

# Time a probe gets on top of its own limit to kill what it started and write its result.
CLEANUP_GRACE = 10.0


def probe_spec(name: str) -> ProbeSpec:
    if name not in REGISTRY:
        raise ProbeUsageError(f"no probe {name!r}; valid: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def probe_module(name: str):
    return probe_spec(name).load()


def list_probes() -> List[dict]:
    return [spec.to_dict() for spec in REGISTRY.values()]


def given_inputs(ctx: ProbeContext) -> List[str]:
    """The inputs of INPUTS this context gives (batches has a default: it selects no mode)."""
    given = {
        "pid": bool(ctx.pids),
        "path": bool(ctx.paths),
        "factory": bool(ctx.factory),
        "script": bool(ctx.script),
        "command": bool(ctx.command),
        "num_workers": ctx.num_workers is not None,
    }
    return [name for name, present in given.items() if present]


def check_targets(pids: Iterable[int]) -> None:
    """Every PID names a live process, else TargetNotInspectable (exit 3) saying which is gone."""
    for pid in pids:
        if pid <= 0:
            raise ProbeUsageError(f"--pid {pid}: not a process id; give the PID of a process of the job (a number > 0)")
        # A zombie still exists (its exit status waits for its parent): each probe says what it
        # can of it (a skipped result), as a diagnosis of it does; only a PID with no process is exit 3.
        if not psutil.pid_exists(pid):
            raise TargetNotInspectable(
                f"process {pid} does not exist (it may have exited)", "give the PID of a running process of the job"
            )


def check_context(spec: ProbeSpec, ctx: ProbeContext) -> None:
    """What every probe checks before it runs: its numbers in range, consent, its targets alive.
    Raises ProbeUsageError (exit 2), ConsentRequired (exit 2) or TargetNotInspectable (exit 3)."""
    if not isinstance(ctx.batches, int) or ctx.batches < 1:
        raise ProbeUsageError(f"--batches {ctx.batches}: give the number of batches to fetch, 1 or more (default 5)")
    if ctx.num_workers is not None and ctx.num_workers < 0:
        raise ProbeUsageError(
            f"--num-workers {ctx.num_workers}: give 0 (load in the main process) or more worker processes"
        )
    if spec.runs_user_code_with(given_inputs(ctx)) and not ctx.allow_exec:
        raise ConsentRequired(f"probe {spec.name!r} runs your code; give --allow-exec to consent (nothing was run)")
    check_targets(ctx.pids)


def help_text(name: str) -> str:
    """`debug-stuck probe NAME --help`: what the probe does, its inputs, time limit and safety."""
    spec = probe_spec(name)
    lines = [f"debug-stuck probe {name}: {spec.summary}", ""]
    if spec.details:
        lines += textwrap.wrap(spec.details, 100) + [""]
    lines.append("inputs:")
    for item in spec.inputs:
        option, what = INPUT_HELP[item]
        lines.append(f"  {option:20} {what}")
    if not spec.inputs:
        lines.append("  none")
    if spec.runs_user_code or any(m.runs_user_code for m in spec.modes):
        lines.append(f"  {'--allow-exec':20} consent to running your code or command (asked before anything runs)")
    lines.append(f"  {'--timeout S':20} time limit in seconds (default {spec.timeout:g} s)")
    lines.append(f"  {'--format json|text':20} output format (default text)")
    lines += ["", f"time limit: {spec.timeout:g} s by default; at the limit it stops, cleans up and says so", ""]
    consent = "; needs --allow-exec" if spec.runs_user_code else "; no --allow-exec needed"
    lines.append(f"safety: {SAFETY_LABELS[spec.safety]}{consent}: {spec.safety_note}")
    for mode in spec.modes:
        consent = "; needs --allow-exec" if mode.runs_user_code else "; no --allow-exec needed"
        given = " ".join(INPUT_HELP[i][0].split()[0] for i in mode.when)
        lines.append(f"  with {given} alone: {SAFETY_LABELS[mode.safety]}{consent}: {mode.safety_note}")
    if spec.examples:
        lines += ["", "examples:"] + [f"  {e}" for e in spec.examples]
    return "\n".join(lines) + "\n"


# The `debug-stuck probe` option of each input, and what it is.
INPUT_HELP = {
    "pid": ("--pid P", "a process of the job (repeatable); a PID that is gone: exit 3"),
    "path": ("--path DIR", "a directory the job reads or writes (repeatable)"),
    "factory": ("--factory MODULE:FUNC", "returns your Dataset or DataLoader"),
    "script": ("--script FILE", "the Python script to run (its arguments after --)"),
    "command": ("-- COMMAND ...", "a command to run (everything after --)"),
    "num_workers": ("--num-workers N", "DataLoader workers to test, 0 or more (default: yours)"),
    "batches": ("--batches N", "batches to fetch, 1 or more (default 5)"),
}


def run_probe(name: str, ctx: ProbeContext) -> ProbeResult:
    """Run one probe with its bound. Never raises for what the probe finds; raises
    ProbeUsageError for bad input, ConsentRequired when user code may not be run, and
    TargetNotInspectable when a --pid is gone or may not be read."""
    spec = probe_spec(name)
    check_context(spec, ctx)
    module = probe_module(name)
    started = time.monotonic()
    try:
        result = call_with_timeout(lambda: module.run(ctx), ctx.timeout + CLEANUP_GRACE, what=f"probe {name}")
    except CallTimedOut:
        result = ProbeResult(
            name, "timeout", f"did not finish within {ctx.timeout:g} s (plus {CLEANUP_GRACE:g} s to clean up)"
        )
    except (ProbeUsageError, TargetNotInspectable):
        raise
    except Exception as exc:  # a probe bug still yields a result, not a traceback
        result = ProbeResult(name, "fail", f"the probe itself failed: {type(exc).__name__}: {exc}")
    result.seconds = time.monotonic() - started
    if result.status not in STATUSES:
        result.status = "fail"
    return result
