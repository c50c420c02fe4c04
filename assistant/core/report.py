"""The one report model. Every front end (text, Markdown, JSON, TUI) renders this."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from debug_stuck import __version__
from debug_stuck.contract import SCHEMA_VERSION
from debug_stuck.redact import redact_obj, redact_text


@dataclass
class Evidence:
    source: str  # stack|process|gpu|log|kernel|probe|answer
    detail: str
    weight: Optional[float] = None
    file: Optional[str] = None
    line: Optional[int] = None
    text: Optional[str] = None
    place: Optional[bool] = None  # true: says where the job waits, not why (the awaited party is not seen)

    def to_dict(self) -> dict:
        out: Dict[str, Any] = {"source": self.source, "detail": self.detail}
        for key in ("weight", "file", "line", "text", "place"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def safety_dict(label: str, note: str = "") -> dict:
    """{"label": ..., "text": what it means, "note": what exactly} (contract.SAFETY_LABELS)."""
    from debug_stuck.contract import SAFETY_LABELS

    out = {"label": label, "text": SAFETY_LABELS.get(label, label)}
    if note:
        out["note"] = note
    return out


@dataclass
class FixItem:
    title: str
    commands: List[str]
    languages: List[str] = field(default_factory=list)
    safety: List[dict] = field(default_factory=list)  # one safety_dict per command
    unfilled: List[str] = field(default_factory=list)  # placeholders the report could not fill
    applies: Dict[str, List[str]] = field(default_factory=dict)  # what the fix is for (framework, platform...)
    flag: Optional[str] = None  # the option of the job's command it sets
    condition: Optional[str] = None  # "if you use kohya": shown when the job's context is not known
    # "finding": written for the object the wait ends at (debug_stuck.advice.remedy); "playbook": the cause's
    origin: str = "playbook"
    why: Optional[str] = None  # what the fix does about this job's blocker, and why it works
    source: Optional[str] = None  # the documentation the fix rests on
    basis: Optional[str] = None  # the remedy and the chain signature it was chosen by

    def to_dict(self) -> dict:
        out = {"title": self.title, "commands": list(self.commands), "languages": list(self.languages)}
        out["safety"] = list(self.safety)
        out["unfilled"] = list(self.unfilled)
        out["applies"] = {k: list(v) for k, v in self.applies.items()}
        out["condition"] = self.condition
        out["origin"] = self.origin
        if self.why:
            out["why"] = self.why
        if self.source:
            out["source"] = self.source
        if self.basis:
            out["basis"] = self.basis
        return out


@dataclass
class CheckItem:
    command: str
    language: str
    safety: dict
    unfilled: List[str] = field(default_factory=list)
    withheld: Optional[str] = None  # why it should not be run now (it would disturb the stuck job)

    def to_dict(self) -> dict:
        return {
            "command": self.command,
            "language": self.language,
            "safety": dict(self.safety),
            "unfilled": list(self.unfilled),
            "withheld": self.withheld,
        }


@dataclass
class Diagnosis:
    cause: str
    title: str
    confidence: float
    evidence: List[Evidence]
    fixes: List[FixItem]
    playbook: str
    summary: str = ""
    checks: List[str] = field(default_factory=list)
    probes: List[str] = field(default_factory=list)
    check_items: List[CheckItem] = field(default_factory=list)  # `checks` with their safety labels
    probe_items: List[dict] = field(default_factory=list)  # `probes` with summary and safety label
    fixes_left_out: List[dict] = field(default_factory=list)  # {title, why}: for another framework...
    score: Optional[float] = None  # the evidence combined (noisy-OR) before calibration into `confidence`
    thin: bool = False  # only the triage answers point here: no evidence the job left

    def evidenced(self) -> bool:
        return any(e.source != "answer" for e in self.evidence)

    def to_dict(self) -> dict:
        return {
            "cause": self.cause,
            "title": self.title,
            "confidence": round(self.confidence, 3),
            "score": round(self.score if self.score is not None else self.confidence, 3),
            "summary": self.summary,
            "evidence": [e.to_dict() for e in self.evidence],
            "fixes": [f.to_dict() for f in self.fixes],
            "checks": list(self.checks),
            "check_items": [c.to_dict() for c in self.check_items],
            "probes": list(self.probes),
            "probe_items": [dict(p) for p in self.probe_items],
            "fixes_left_out": [dict(f) for f in self.fixes_left_out],
            "playbook": self.playbook,
        }


@dataclass
class Verdict:
    hung: Optional[bool] = None
    cause: Optional[str] = None
    phase: str = "unknown"
    confidence: float = 0.0
    summary: str = ""  # composed once from the parts below (debug_stuck.core.verdict.compose)
    state: Optional[str] = None  # hung | slow | progressing; None when not observed
    tie: Optional[dict] = None  # {"causes": [a, b], "breaker": words, "question" or "probe": what separates them}
    # The parts the summary is phrased from, each set by the stage that knows it:
    finding: Optional[dict] = None  # {"kind": chain | culprit | mismatch, "text": the terminal finding}
    state_reasons: List[str] = field(default_factory=list)  # how the state was seen
    slow_because: Optional[str] = None
    stale_log: Optional[str] = None  # "has not changed for 2 h (last step seen: 50)"
    open_questions: List[str] = field(default_factory=list)  # answers that would let it name a cause
    silent_nodes: Optional[str] = None  # the nodes that did not answer, when every other rank waits
    no_nodes: Optional[str] = None  # no node of the job answered at all

    def to_dict(self) -> dict:
        out = {
            "hung": self.hung,
            "state": self.state,
            "cause": self.cause,
            "phase": self.phase,
            "confidence": round(self.confidence, 3),
            "summary": self.summary,
        }
        if self.tie is not None:
            out["tie"] = {k: v for k, v in self.tie.items() if k in ("causes", "breaker", "question", "probe")}
        if self.finding is not None:
            out["finding"] = dict(self.finding)
        return out


@dataclass
class Report:
    answers: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    pattern: Optional[str] = None
    pattern_reason: Optional[str] = None  # why `pattern` is null
    verdict: Verdict = field(default_factory=Verdict)
    diagnoses: List[Diagnosis] = field(default_factory=list)
    culprit: Optional[dict] = None
    processes: List[dict] = field(default_factory=list)
    gpus: List[dict] = field(default_factory=list)
    probes: List[dict] = field(default_factory=list)
    resume: Optional[dict] = None
    errors: List[str] = field(default_factory=list)
    logs: List[dict] = field(default_factory=list)
    triage_path: List[dict] = field(default_factory=list)
    next_questions: List[dict] = field(default_factory=list)
    stack_groups: List[dict] = field(default_factory=list)
    chain: List[dict] = field(default_factory=list)  # the main chain: who waits on what, to the blocker
    chains: List[List[dict]] = field(default_factory=list)  # one per stack group
    kernel: List[str] = field(default_factory=list)
    gpu_note: Optional[str] = None
    notes: List[str] = field(default_factory=list)
    job: dict = field(default_factory=dict)  # what the advice was filled from: placeholder values, context
    edits: List[dict] = field(default_factory=list)  # suggested changes to the user's own code, as diffs
    # evidence that could not be read: `what`, `why`, and `get_it` (the command or setting that would)
    missing: List[dict] = field(default_factory=list)
    flight_recorder: Optional[dict] = None  # PyTorch's Flight Recorder dumps matched across ranks
    created: float = field(default_factory=time.time)
    # every answer the evidence and the logs offered, on the triage path or off it (key -> value,
    # source, why): the session pre-fills follow-ups from them; not part of the JSON report
    suggested_answers: Dict[str, dict] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The JSON report (docs/contract.md), every secret replaced (debug_stuck.redact)."""
        return redact_obj(self._fields())

    def redact(self) -> Report:
        """Replace every secret in place, so that whatever shows this report (the text and Markdown
        renderers, the TUI, the clipboard) shows none. Returns the report."""
        for field_name in (
            "answers", "culprit", "processes", "gpus", "probes", "resume", "logs", "stack_groups", "chain", "chains",
            "job", "edits", "missing", "flight_recorder",
        ):  # fmt: skip
            setattr(self, field_name, redact_obj(getattr(self, field_name)))
        for field_name in ("errors", "kernel", "notes"):
            setattr(self, field_name, [redact_text(line) for line in getattr(self, field_name)])
        self.gpu_note = redact_text(self.gpu_note) if self.gpu_note else self.gpu_note
        self.verdict.summary = redact_text(self.verdict.summary)
        if self.verdict.finding:
            self.verdict.finding = redact_obj(self.verdict.finding)
        for diagnosis in self.diagnoses:
            diagnosis.summary = redact_text(diagnosis.summary)
            for evidence in diagnosis.evidence:
                evidence.detail = redact_text(evidence.detail)
                evidence.text = redact_text(evidence.text) if evidence.text else evidence.text
        return self

    def _fields(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "debug-stuck", "version": __version__},
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.created)),
            "answers": self.answers,
            "pattern": self.pattern,
            "pattern_reason": self.pattern_reason,
            "verdict": self.verdict.to_dict(),
            "diagnoses": [d.to_dict() for d in self.diagnoses],
            "culprit": self.culprit,
            "processes": self.processes,
            "gpus": self.gpus,
            "probes": self.probes,
            "resume": self.resume,
            "errors": list(self.errors),
            "logs": self.logs,
            "triage_path": self.triage_path,
            "next_questions": self.next_questions,
            "stack_groups": self.stack_groups,
            "chain": self.chain,
            "chains": self.chains,
            "kernel": self.kernel,
            "gpu_note": self.gpu_note,
            "notes": self.notes,
            "job": self.job,
            "edits": self.edits,
            "missing": self.missing,
            "flight_recorder": self.flight_recorder,
        }
