"""Turn answers and observations into ranked diagnoses.

1. Match every playbook signal against the observed lines of its source.
2. Derive triage answers the user did not give: from signal `implies`, from the tree's log
   hints, from log progress, and from causes whose evidence is strong.
3. Walk the tree for priors; combine each cause's prior and evidence by noisy-OR.
All cause knowledge comes from skills/; this module only applies it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from debug_stuck.contract import UNKNOWN
from debug_stuck.core.answers import Answer
from debug_stuck.core.calibration import assign_probabilities
from debug_stuck.core.knowledge import Knowledge, Signal
from debug_stuck.core.report import CheckItem, Diagnosis, Evidence, FixItem, Verdict, safety_dict
from debug_stuck.core.stalls import timed_out_during
from debug_stuck.core.tree import Walk

CAUSE_THRESHOLD = 0.25  # below this the verdict names no cause
LISTED_THRESHOLD = 0.05
MAX_DIAGNOSES = 8
STRONG_EVIDENCE = 0.5  # a signal this strong can answer a tree question (from_causes)
CONTEXT_WEIGHT = 0.2  # the job's own evidence this weak, all of it together, is context: a thin verdict
ANSWER_PRECEDENCE = {"user": 3, "evidence": 2, "log": 1}

# Which observation sources each signal source is matched against. Kernel messages are often
# pasted into, or interleaved with, the training log.
SIGNAL_SOURCES = {
    "log": ("log",),
    "kernel": ("kernel", "log"),
    "stack": ("stack",),
    "process": ("process",),
    "gpu": ("gpu",),
    "probe": ("probe",),
    "chain": ("chain",),
    "flight-recorder": ("flight-recorder",),
    "fact": ("fact",),
}


@dataclass
class ObservedLine:
    text: str
    file: Optional[str] = None
    line: Optional[int] = None
    subject: Optional[str] = None  # e.g. "pid 123 (rank 1)": whose stack or process this is
    pid: Optional[int] = None
    origin: Optional[str] = None  # a fact line: what it was read from (stack, log), the evidence's source
    quote: Optional[str] = None  # a fact line read from a log: the line itself, quoted as evidence


@dataclass
class Observations:
    """What was seen, one line at a time, per source (see skills/README.md for line shapes)."""

    lines: Dict[str, List[ObservedLine]] = field(default_factory=dict)
    # Per log: (last step seen in the current run, or None). Used for the `step` question.
    last_steps: List[Optional[int]] = field(default_factory=list)
    derived: Dict[str, Answer] = field(default_factory=dict)  # answers found by collectors
    derived_why: Dict[str, str] = field(default_factory=dict)
    findings: List[tuple] = field(default_factory=list)  # (probe name, debug_stuck.probes.targeted.registry.Finding)

    def add(self, source: str, line: ObservedLine) -> None:
        self.lines.setdefault(source, []).append(line)

    def only(self, pids) -> Observations:
        """The lines about these processes, plus those about no process in particular (GPU, kernel)."""
        keep = set(pids)
        out = Observations(derived=dict(self.derived), derived_why=dict(self.derived_why), findings=list(self.findings))
        for source, lines in self.lines.items():
            out.lines[source] = [ln for ln in lines if ln.pid is None or ln.pid in keep]
        return out

    def offer_answer(self, answer: Answer, why: str) -> None:
        current = self.derived.get(answer.key)
        if current is None or ANSWER_PRECEDENCE[answer.source] > ANSWER_PRECEDENCE[current.source]:
            self.derived[answer.key] = answer
            self.derived_why[answer.key] = why


@dataclass
class SignalMatch:
    signal: Signal
    observed_source: str
    where: ObservedLine
    detail: str
    count: int = 1

    def evidence(self) -> Evidence:
        detail = self.detail
        if self.where.subject:
            detail = f"{self.where.subject}: {detail}"
        if self.count > 1:
            detail += f" (seen {self.count} times)"
        source = self.signal.source if self.observed_source == self.signal.source else self.observed_source
        if source == "fact" and self.where.origin:
            source = self.where.origin  # the user reads a log line or a stack, not our fact line
        return Evidence(
            source=source,
            detail=detail,
            weight=self.signal.weight,
            file=self.where.file,
            line=self.where.line,
            text=(self.where.quote or self.where.text)[:300],
            place=self.signal.place or None,
        )


@dataclass
class Classification:
    answers: Dict[str, Answer]
    answer_notes: Dict[str, str]
    walk: Walk
    diagnoses: List[Diagnosis]
    verdict: Verdict
    matches: List[SignalMatch]


def match_signals(knowledge: Knowledge, obs: Observations, sources=None) -> List[SignalMatch]:
    """Every signal against every line of its sources; a signal keeps its latest match."""
    found: Dict[Tuple[str, int], SignalMatch] = {}
    for signal in knowledge.signals():
        if signal.source == "answer" or (sources and signal.source not in sources):
            continue
        for observed_source in SIGNAL_SOURCES.get(signal.source, ()):
            for line in obs.lines.get(observed_source, ()):
                m = signal.pattern.search(line.text)
                if not m:
                    continue
                key = (signal.cause, signal.index)
                previous = found.get(key)
                count = previous.count + 1 if previous else 1
                found[key] = SignalMatch(signal, observed_source, line, signal.describe(m), count)
    return list(found.values())


# A probe finding names its cause itself; its severity is its weight as evidence.
FINDING_WEIGHTS = {"fail": 0.7, "warn": 0.4, "info": 0.05}


def _finding_matches(knowledge: Knowledge, obs: Observations) -> List[SignalMatch]:
    out = []
    for i, (probe, finding) in enumerate(obs.findings):
        if finding.cause not in knowledge.playbooks:
            continue
        weight = FINDING_WEIGHTS.get(finding.severity, 0.0)
        detail = f"probe {probe}: {finding.message}"
        signal = Signal(finding.cause, -1 - i, "probe", re.compile(""), weight, detail, {})
        out.append(SignalMatch(signal, "probe", ObservedLine(detail), detail))
    return out


def _answer_signal_matches(knowledge: Knowledge, answers: Dict[str, Answer]) -> List[SignalMatch]:
    out = []
    lines = [ObservedLine(f"{a.key}={a.value}") for a in answers.values() if a.value != UNKNOWN]
    for signal in knowledge.signals():
        if signal.source != "answer":
            continue
        for line in lines:
            m = signal.pattern.search(line.text)
            if m:
                out.append(SignalMatch(signal, "answer", line, signal.describe(m)))
                break
    return out


def _answered_event_matches(knowledge: Knowledge, answers: Dict[str, Answer], obs: Observations) -> List[SignalMatch]:
    """A stall report in the log read with the event the user says the job stopped around (facts.py)."""
    event = answers.get("event")
    found = timed_out_during(knowledge.stall_reports, event.value if event else None, obs.lines.get("fact", ()))
    if found is None:
        return []
    text, report = found
    line = ObservedLine(text, file=report.file, line=report.line, origin="log", quote=report.quote)
    obs.add("fact", line)
    alone = Observations()
    alone.add("fact", line)
    return match_signals(knowledge, alone, sources=("fact",))


def derive_answers(knowledge: Knowledge, obs: Observations, matches: List[SignalMatch]) -> None:
    """Offer answers found in the evidence; the user's own answers still win later."""
    tree = knowledge.tree
    for match in matches:
        # a fact read from a log line answers with the log's precedence, not as live evidence
        from_log = match.observed_source == "log" or match.where.origin == "log"
        source = "log" if from_log else "evidence"
        for key, value in match.signal.implies.items():
            question = tree.questions.get(key)
            if question and (value in question.values or question.kind == "integer"):
                obs.offer_answer(Answer(key, value, source), f"{match.detail}")
    for key, question in tree.questions.items():
        for value, causes in question.from_causes.items():
            for match in matches:
                if match.signal.cause in causes and match.signal.weight >= STRONG_EVIDENCE:
                    source = "log" if match.observed_source == "log" else "evidence"
                    obs.offer_answer(Answer(key, value, source), match.detail)
                    break
    steps = [s for s in obs.last_steps if s is not None and s > 0]
    if len(steps) >= 2:
        value = "same-step" if len(set(steps)) == 1 else "random"
        obs.offer_answer(Answer("step", value, "log"), f"the logs stopped at steps {', '.join(map(str, steps))}")


def combine(answers: Dict[str, Answer], derived: Dict[str, Answer]) -> Dict[str, Answer]:
    out = dict(derived)
    for key, answer in answers.items():
        if answer.value != UNKNOWN or key not in out:
            out[key] = answer
    return out


def settle_given(knowledge: Knowledge, answers: Dict[str, Answer], why: Dict[str, str]) -> Dict[str, Answer]:
    """Answers another answer settles (the tree's `given`): with no GPU, the GPU question is moot."""
    out = dict(answers)
    for key, question in knowledge.tree.questions.items():
        current = out.get(key)
        if current is not None and current.value != UNKNOWN:
            continue
        for other, mapping in question.given.items():
            settled = out.get(other)
            if settled is not None and settled.value in mapping:
                out[key] = Answer(key, mapping[settled.value], "log" if settled.source == "log" else "evidence")
                why[key] = f"{other} is {settled.value}" + (f" ({why[other]})" if why.get(other) else "")
                break
    return out


def noisy_or(weights: List[float]) -> float:
    remaining = 1.0
    for w in weights:
        if w > 0:
            remaining *= 1.0 - min(w, 0.99)
    score = 1.0 - remaining
    for w in weights:
        if w < 0:
            score *= 1.0 + w
    return score


def _step_text(step) -> str:
    if step.assumed:
        return f"{step.key} unknown"
    if step.how == "default":
        return f"{step.key} not asked (usually {step.value})"
    source = "" if step.how == "user" else f" (from the {step.how})"
    return f"{step.key}={step.value}{source}"


def classify(knowledge: Knowledge, user_answers: Dict[str, Answer], obs: Observations) -> Classification:
    matches = match_signals(knowledge, obs) + _finding_matches(knowledge, obs)
    derive_answers(knowledge, obs, matches)
    answers = settle_given(knowledge, combine(user_answers, obs.derived), obs.derived_why)
    notes = {k: obs.derived_why[k] for k, a in answers.items() if a.source != "user" and k in obs.derived_why}
    matches += _answer_signal_matches(knowledge, answers) + _answered_event_matches(knowledge, answers, obs)
    walk = knowledge.tree.walk({k: (a.value, a.source) for k, a in answers.items()})

    by_cause: Dict[str, List[SignalMatch]] = {}
    for m in matches:
        by_cause.setdefault(m.signal.cause, []).append(m)
    by_cause = {cause: once_per_line(found) for cause, found in by_cause.items()}
    # Only answers someone gave are shown as answers: a step the walk guessed is unknown, and one it
    # took the usual answer for says so (the user never said "errors=none").
    path_text = ", ".join(_step_text(s) for s in walk.steps)
    diagnoses: List[Diagnosis] = []
    for cause, book in knowledge.playbooks.items():
        prior = walk.priors.get(cause, 0.0)
        cause_matches = sorted(by_cause.get(cause, []), key=lambda m: -m.signal.weight)
        confidence = noisy_or([prior] + [m.signal.weight for m in cause_matches])
        if confidence < LISTED_THRESHOLD:
            continue
        evidence = []
        if prior:
            evidence.append(
                Evidence(
                    "answer",
                    f"the triage answers ({path_text}) lead here: {prior:.0%} before any evidence",
                    weight=prior,
                )
            )
        evidence += [m.evidence() for m in cause_matches]
        diagnoses.append(
            Diagnosis(
                cause=cause,
                title=book.title,
                confidence=round(confidence, 3),  # a probability once the causes are ranked
                score=round(confidence, 3),
                thin=not evidence_of_the_job(cause_matches),
                evidence=evidence,
                fixes=[fix_item(f) for f in book.fixes],
                playbook=book.relative_path,
                summary=book.summary,
                checks=[b.text for b in book.checks],
                probes=list(book.probes),
                check_items=[CheckItem(b.text, b.language, safety_dict(b.safety, b.note)) for b in book.checks],
                probe_items=[probe_item(knowledge, name) for name in book.probes],
            )
        )
    diagnoses.sort(key=lambda d: (-d.score, d.cause))
    diagnoses = diagnoses[:MAX_DIAGNOSES]
    assign_probabilities(knowledge, diagnoses)
    verdict = _verdict(knowledge, answers, walk, diagnoses)
    return Classification(answers, notes, walk, diagnoses, verdict, matches)


def evidence_of_the_job(matches: List[SignalMatch]) -> bool:
    """Something the job left (a log line, a stack, a process, a probe) points here, not only the
    triage answers, and not only where the job waits (a signal marked `place`: the main thread
    waiting for its next batch says the data does not come, not why the workers do not send it),
    and more than context: signals of context weight alone (skills/README.md: 0.1-0.3, "fits several
    causes", such as "training had ended") leave it as thin as the answers do."""
    own = [m.signal.weight for m in matches if m.signal.source != "answer" and not m.signal.place]
    return noisy_or([weight for weight in own if weight > 0]) > CONTEXT_WEIGHT


def once_per_line(matches: List[SignalMatch]) -> List[SignalMatch]:
    """One line of a log is one piece of evidence for a cause, however many signals read it (a
    message's own signal and the fact the library catalog makes of it): the strongest counts. A
    thread's wait fact counts only where no frame of that thread already spoke for the cause."""
    best: Dict[tuple, SignalMatch] = {}
    kept: List[SignalMatch] = []
    threads_heard = {
        (m.where.subject, m.where.pid) for m in matches if m.observed_source == "stack" and m.signal.weight > 0
    }
    for m in matches:
        where = m.where
        origin = where.origin or m.observed_source
        if m.signal.weight <= 0:
            kept.append(m)
        elif (
            m.observed_source == "fact"
            and origin == "stack"
            and where.text.startswith(("wait=", "job="))  # of that one thread (a straggler fact is of several)
            and (where.subject, where.pid) in threads_heard
        ):
            continue
        elif origin == "log" and where.file is not None:
            key = (where.file, where.line, where.quote or where.text)
            if key not in best or m.signal.weight > best[key].signal.weight:
                best[key] = m
        else:
            kept.append(m)
    return kept + list(best.values())


def fix_item(fix) -> FixItem:
    return FixItem(
        fix.title,
        fix.commands,
        [b.language for b in fix.blocks],
        safety=[safety_dict(b.safety, b.note) for b in fix.blocks],
        applies={k: list(v) for k, v in fix.applies.items()},
        flag=fix.flag,
    )


def probe_item(knowledge: Knowledge, name: str) -> dict:
    """A probe a playbook names, as the report lists it: its summary and safety label (probes.yaml)."""
    spec = knowledge.probes.get(name) or {}
    summary = str(spec.get("summary") or "")
    return {"name": name, "summary": summary, "safety": safety_dict(spec.get("safety"), spec.get("safety_note") or "")}


def cause_phase(knowledge: Knowledge, cause: str, answers) -> str:
    """The phase a cause's playbook says it hangs in, unless the job's answers contradict it: a cause
    that usually strikes at start-up (a prompt, a rendezvous) found in a job that was mid-run happened
    in a phase the playbook does not say."""
    phase = knowledge.playbooks[cause].phase
    answer = answers.get("phase")
    return "unknown" if phase == "startup" and answer is not None and answer.value == "mid-run" else phase


def phase_for_new_cause(knowledge: Knowledge, cause: str, answers, current: str) -> str:
    """The verdict's phase once a later stage names another cause: an answer that set the phase (the
    tree's verdict_phase) keeps it; else the new cause's own (cause_phase)."""
    for key, question in knowledge.tree.questions.items():
        answer = answers.get(key)
        if answer is not None and answer.value in question.verdict_phase:
            return current
    return cause_phase(knowledge, cause, answers)


def _verdict(knowledge: Knowledge, answers: Dict[str, Answer], walk: Walk, diagnoses: List[Diagnosis]) -> Verdict:
    verdict = Verdict()
    top = diagnoses[0] if diagnoses else None
    if top and top.score >= CAUSE_THRESHOLD:
        verdict.cause = top.cause
        verdict.confidence = top.confidence
        verdict.phase = cause_phase(knowledge, top.cause, answers)
    elif top:
        verdict.confidence = top.confidence
    for key, question in knowledge.tree.questions.items():
        answer = answers.get(key)
        if answer and answer.value in question.verdict_phase:
            verdict.phase = question.verdict_phase[answer.value]
    verdict.open_questions = list(dict.fromkeys(walk.assumed_keys))
    return verdict
