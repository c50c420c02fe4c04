"""The diagnosis pipeline shared by every front end: gather, classify, build the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

import yaml

from assistant.answers import Answer, load_answers_file
from assistant.classify import Classification, Observations, ObservedLine, classify
from assistant.contract import CONTRACT_ANSWER_KEYS, UNKNOWN
from assistant.errors import BadInput
from assistant.kb import Knowledge, load_knowledge
from assistant.paths import examples_dir
from assistant.report import Evidence, Report
from assistant.tree import Tree
from probes.logtail import LogTail, parse_progress, read_log_tail

# A log silent for this long, and for this many step intervals, counts as a hang.
STALE_FLOOR_SECONDS = 300.0
STALE_STEP_MULTIPLE = 20.0


@dataclass
class DiagnoseRequest:
    answers: Dict[str, Answer] = field(default_factory=dict)
    logs: List[str] = field(default_factory=list)
    log_bytes: Optional[int] = None
    pids: List[int] = field(default_factory=list)
    auto: bool = False
    window: float = 1.0
    samples: int = 2
    native: bool = True
    progress: Optional[Callable[[str], None]] = None
    probes: List[str] = field(default_factory=list)  # targeted probes to run as part of the diagnosis
    allow_exec: bool = False

    @property
    def live(self) -> bool:
        return bool(self.pids) or self.auto


def run_diagnosis(request: DiagnoseRequest, knowledge: Optional[Knowledge] = None) -> Report:
    knowledge = knowledge or load_knowledge()
    obs = Observations()
    report = Report()
    snap = None
    logs = list(request.logs)
    if request.live:
        from assistant.collect import collect
        from assistant.observe import observe

        snap = collect(
            request.pids,
            auto=request.auto,
            extra_logs=request.logs,
            window=request.window,
            samples=request.samples,
            native=request.native,
            progress=request.progress,
        )
        observe(snap, obs)
        logs = [lg.path for lg in snap.logs]
        report.errors.extend(snap.errors)
    tails = [observe_log(knowledge.tree, path, obs, request.log_bytes) for path in logs]
    for tail in tails:
        if tail.error:
            report.errors.append(tail.error)
    for result in run_requested_probes(request, obs):
        report.probes.append(result.to_dict())
    result = classify(knowledge, request.answers, obs)
    fill_report(report, knowledge, result, tails)
    if snap is not None:
        from assistant.live import fill_live

        fill_live(report, knowledge, snap, obs, request.answers)
        if report.resume is None and snap.processes:
            report.resume = _resume_plan(snap.processes[0].pid, report.errors)
    return report


def _resume_plan(pid: int, errors: List[str]) -> Optional[dict]:
    """How to get training going again from the last good checkpoint (bounded: checkpoint
    directories are often on the very mount that hangs)."""
    from assistant.recovery import plan_resume_for_pid
    from probes.bounded import CallTimedOut, call_with_timeout

    try:
        return call_with_timeout(lambda: plan_resume_for_pid(pid).to_dict(), 10.0, "planning the resume").copy()
    except CallTimedOut as exc:
        errors.append(f"resume: {exc}")
    except Exception as exc:  # the diagnosis stands without a resume plan
        errors.append(f"resume: could not plan: {type(exc).__name__}: {exc}")
    return None


def run_requested_probes(request: DiagnoseRequest, obs: Observations):
    """Run the probes asked for; their findings become evidence. Consent is checked up front."""
    if not request.probes:
        return []
    from probes.targeted import ProbeContext, ProbeUsageError, probe_module, run_probe

    for name in request.probes:
        try:
            probe_module(name)
        except ProbeUsageError as exc:
            raise BadInput(str(exc)) from None
        if probe_module(name).RUNS_USER_CODE and not request.allow_exec:
            raise BadInput(f"probe {name!r} runs your code", "add --allow-exec to consent, or leave that probe out")
    results = []
    for name in request.probes:
        if request.progress:
            request.progress(f"running probe {name}")
        module = probe_module(name)
        ctx = ProbeContext(timeout=module.DEFAULT_TIMEOUT, allow_exec=request.allow_exec, pids=list(request.pids))
        result = run_probe(name, ctx)
        for line in result.fact_lines():
            obs.add("probe", ObservedLine(line))
        obs.findings.extend((name, f) for f in result.findings)
        results.append(result)
    return results


def observe_log(tree: Tree, path: str, obs: Observations, max_bytes: Optional[int] = None) -> LogTail:
    tail = read_log_tail(path, max_bytes=max_bytes) if max_bytes else read_log_tail(path)
    if tail.error:
        return tail
    for text, number in zip(tail.lines, tail.line_numbers):
        obs.add("log", ObservedLine(text, file=path, line=number if tail.whole_file else None))
    run = _current_run(tree, tail.lines)
    progress = parse_progress(run)
    obs.last_steps.append(progress.last_step)
    mid_run = progress.last_step is not None and progress.last_step > 0
    if mid_run:
        obs.offer_answer(
            Answer("phase", "mid-run", "log"), f"{Path(path).name} shows step {progress.last_step} in this run"
        )
    last = run[-tree.last_lines :]
    for question in tree.questions.values():
        for scope_lines, scope in ((last, "last"), (run, "tail")):
            hit = _latest_hint(question, scope_lines, scope)
            if hit is None:
                continue
            hint, line = hit
            why = f"{Path(path).name}: {line.strip()[:160]!r}"
            obs.offer_answer(Answer(question.key, hint.value, "log"), why)
            if not mid_run:
                for key, value in hint.implies.items():
                    obs.offer_answer(Answer(key, value, "log"), why)
    return tail


def _current_run(tree: Tree, lines: List[str]) -> List[str]:
    if tree.run_start is None:
        return lines
    for i in range(len(lines) - 1, -1, -1):
        if tree.run_start.search(lines[i]):
            return lines[i:]
    return lines


def _latest_hint(question, lines: List[str], scope: str):
    hints = [h for h in question.hints if h.scope == scope]
    if not hints:
        return None
    for line in reversed(lines):
        for hint in hints:
            if hint.pattern.search(line):
                return hint, line
    return None


def fill_report(report: Report, knowledge: Knowledge, result: Classification, tails: List[LogTail]) -> None:
    # Derived answers off the walked path (e.g. a start-up hint in a mid-run log) would only confuse.
    relevant = set(CONTRACT_ANSWER_KEYS) | {s.key for s in result.walk.steps}
    report.answers = {k: a.to_dict() for k, a in result.answers.items() if a.source == "user" or k in relevant}
    for key, why in result.answer_notes.items():
        if key in report.answers:
            report.answers[key]["why"] = why
    report.pattern = result.walk.pattern
    report.diagnoses = result.diagnoses
    report.verdict = result.verdict
    report.triage_path = [s.to_dict() for s in result.walk.steps]
    report.next_questions = [
        dict(knowledge.tree.questions[s.key].to_dict(), assumed=s.value)
        for s in result.walk.steps
        if s.how in ("assumed", "default")
    ]
    stale = []
    for tail in tails:
        if tail.error:
            continue
        entry = tail.to_dict()
        if tail.lines:
            entry["last_line"] = tail.lines[-1][:300]
        report.logs.append(entry)
        age = tail.seconds_since_modified()
        interval = tail.progress.seconds_per_step or 0.0
        if age is not None and age > max(STALE_FLOOR_SECONDS, STALE_STEP_MULTIPLE * interval):
            stale.append((tail, age))
    if stale and report.verdict.hung is None:
        report.verdict.hung = True
        tail, age = stale[0]
        note = f"{Path(tail.path).name} has not changed for {_duration(age)}"
        if tail.progress.last_step is not None:
            note += f" (last step seen: {tail.progress.last_step})"
        for diagnosis in report.diagnoses[:1]:
            diagnosis.evidence.append(Evidence("log", note, file=tail.path))
        report.verdict.summary += f" The log {note[len(Path(tail.path).name) + 1 :]}."


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds // 86400} days"


# Bundled examples: skills/examples/NAME/{example.yaml, *.log}


def list_examples() -> Dict[str, str]:
    out = {}
    folder = examples_dir()
    if folder.is_dir():
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
            meta = _example_meta(sub)
            out[sub.name] = str(meta.get("title", ""))
    return out


def _example_meta(folder: Path) -> dict:
    try:
        data = yaml.safe_load((folder / "example.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def load_example(knowledge: Knowledge, name: str) -> DiagnoseRequest:
    folder = examples_dir() / name
    if not (folder / "example.yaml").is_file():
        names = ", ".join(list_examples()) or "none installed"
        raise BadInput(f"no bundled example {name!r}", f"valid: {names}")
    answers = load_answers_file(knowledge.tree.questions, str(folder / "example.yaml"))
    logs = sorted(str(p) for p in folder.glob("*.log"))
    return DiagnoseRequest(answers={k: a for k, a in answers.items() if a.value != UNKNOWN}, logs=logs)


def expected_cause(name: str) -> Optional[str]:
    return _example_meta(examples_dir() / name).get("expect", {}).get("cause")
