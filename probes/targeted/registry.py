"""Targeted probes: the checks an expert runs next, each bounded in time and safe.

What probes exist, and what each needs, is data: `probes.yaml` beside this file (name, module,
summary, time limit, whether it runs the user's code, its inputs). A probe's module, loaded lazily
when it runs, exposes `NAME` and `run(ctx: ProbeContext) -> ProbeResult`.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.contract import SAFETY_LABELS
from debug_stuck.probes.targeted.base import STATUSES, ConsentRequired, ProbeContext, ProbeResult, ProbeUsageError
from debug_stuck.yamlio import load_yaml

INPUTS = ("pid", "path", "factory", "script", "command", "num_workers", "batches")
DECLARATIONS = Path(__file__).with_name("probes.yaml")


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

    def load(self):
        return importlib.import_module(self.module)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "summary": self.summary,
            "timeout": self.timeout,
            "runs_user_code": self.runs_user_code,
            "inputs": list(self.inputs),
            "safety": {"label": self.safety, "text": SAFETY_LABELS[self.safety], "note": self.safety_note},
        }


def load_declarations(path: Path = DECLARATIONS) -> Dict[str, ProbeSpec]:
    """The probes of probes.yaml, checked; a malformed file raises ValueError naming the field."""

    data = load_yaml(path.read_text(encoding="utf-8"))
    out: Dict[str, ProbeSpec] = {}
    for name, entry in (data or {}).get("probes", {}).items():
        where = f"{path.name}: probes.{name}"
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


def run_probe(name: str, ctx: ProbeContext) -> ProbeResult:
    """Run one probe with its bound. Never raises for what the probe finds; raises
    ProbeUsageError for bad input and ConsentRequired when user code may not be run."""
    spec = probe_spec(name)
    if spec.runs_user_code and not ctx.allow_exec:
        raise ConsentRequired(f"probe {name!r} runs your code; give --allow-exec to consent (nothing was run)")
    module = probe_module(name)
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
