"""Build the report from a classification: answers, pattern, ranked diagnoses, verdict, logs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List

from debug_stuck.contract import CONTRACT_ANSWER_KEYS
from debug_stuck.core.calibration import TIE
from debug_stuck.core.classify import Classification, Observations
from debug_stuck.core.knowledge import Knowledge
from debug_stuck.core.logstacks import feeder_errors, is_tool_dump, process_errors
from debug_stuck.core.logtext import LogTail
from debug_stuck.core.report import Evidence, Report
from debug_stuck.core.verdict import breaker_words

STACK_WAIT_LIBRARY = re.compile(r"^wait=\S+ entry=\S+ lib=(\S+)")
STACK_LIBRARIES = re.compile(r" libs=(\S+)")
LOG_ENTRY = re.compile(r"^log=\S+ entry=(\S+)")  # a fact line debug_stuck.core.facts made of a log line

# A log silent for this long, and for this many step intervals, counts as a hang.
STALE_FLOOR_SECONDS = 300.0
STALE_STEP_MULTIPLE = 20.0


def fill_report(
    report: Report, knowledge: Knowledge, result: Classification, tails: List[LogTail], obs: Observations
) -> None:
    # Derived answers off the walked path (e.g. a start-up hint in a mid-run log) would only confuse.
    relevant = set(CONTRACT_ANSWER_KEYS) | {s.key for s in result.walk.steps}
    report.answers = {k: a.to_dict() for k, a in result.answers.items() if a.source == "user" or k in relevant}
    for key, why in result.answer_notes.items():
        if key in report.answers:
            report.answers[key]["why"] = why
    report.pattern = result.walk.pattern
    if report.pattern is None:
        assumed = list(dict.fromkeys(result.walk.assumed_keys))
        report.pattern_reason = (
            f"not named: {', '.join(assumed)} {'is' if len(assumed) == 1 else 'are'} unknown"
            if assumed
            else "not named: the answers lead to no pattern"
        )
    report.diagnoses = result.diagnoses
    report.verdict = result.verdict
    report.triage_path = [s.to_dict() for s in result.walk.steps]
    report.next_questions = [
        dict(knowledge.tree.questions[s.key].to_dict(), assumed=s.value)
        for s in result.walk.steps
        if s.how in ("assumed", "default")
    ]
    _state_the_tie(report, knowledge)
    stale = []
    libraries = libraries_by_log(knowledge, obs)
    stack_facts = stack_facts_by_log(obs)
    for tail in tails:
        if tail.error:
            continue
        entry = tail.to_dict()
        if tail.lines:
            entry["last_line"] = tail.lines[-1][:300]
            if libraries.get(tail.path):
                entry["libraries"] = libraries[tail.path]
            if stack_facts.get(tail.path):
                entry["stack_facts"] = stack_facts[tail.path]
            died = process_errors(tail.lines)
            if died:
                entry["process_errors"] = died
            dropped = feeder_errors(tail.lines)
            if dropped:
                entry["feeder_errors"] = dropped[-3:]
        report.logs.append(entry)
        if tail.whole_file and is_tool_dump(tail.lines):
            continue  # a saved py-spy, pystack or gdb dump: its age is not the job's silence
        age = tail.seconds_since_modified()
        interval = tail.progress.seconds_per_step or 0.0
        if age is not None and age > max(STALE_FLOOR_SECONDS, STALE_STEP_MULTIPLE * interval):
            stale.append((tail, age))
    if stale and report.verdict.hung is None:
        report.verdict.hung = True
        tail, age = stale[0]
        silence = f"has not changed for {_duration(age)}"
        if tail.progress.last_step is not None:
            silence += f" (last step seen: {tail.progress.last_step})"
        for diagnosis in report.diagnoses[:1]:
            diagnosis.evidence.append(Evidence("log", f"{Path(tail.path).name} {silence}", file=tail.path))
        report.verdict.stale_log = silence


def stack_facts_by_log(obs: Observations) -> Dict[str, List[str]]:
    """For each log, what the stack dumps pasted in it prove about the job (frames.yaml `facts`:
    debugger, dataloader, distributed...), from the `job=<fact>` lines made of them."""
    found: Dict[str, List[str]] = {}
    for line in obs.lines.get("fact", ()):
        if line.file and line.origin == "stack" and line.text.startswith("job="):
            facts = found.setdefault(line.file, [])
            if line.text[4:] not in facts:
                facts.append(line.text[4:])
    return {path: sorted(facts) for path, facts in found.items()}


def libraries_by_log(knowledge: Knowledge, obs: Observations) -> Dict[str, List[str]]:
    """For each log, the libraries whose own messages (skills/data/log-catalog.yaml) its lines are,
    and whose frames (skills/data/frames.yaml) the stack dumps pasted in it wait in, most first:
    read from the `log=<fact> entry=<id>` and `wait=<kind> entry=<id> lib=<library>` facts already
    made of them."""
    library_of = {entry["id"]: str(entry.get("library") or "") for entry in knowledge.log_catalog or []}
    counts: Dict[str, Dict[str, int]] = {}
    for line in obs.lines.get("fact", ()):
        if not line.file:
            continue
        if line.origin == "stack":
            waits = STACK_WAIT_LIBRARY.match(line.text)
            also = STACK_LIBRARIES.search(line.text)
            found_libraries = [waits.group(1)] if waits else []
            more = also.group(1).split(",") if also else []
            found_libraries += [name for name in more if name not in found_libraries]
        else:
            found = LOG_ENTRY.match(line.text) if line.origin == "log" else None
            found_libraries = [library_of.get(found.group(1))] if found else []
        for library in filter(None, found_libraries):
            per_log = counts.setdefault(line.file, {})
            per_log[library] = per_log.get(library, 0) + 1
    return {path: sorted(seen, key=lambda name: (-seen[name], name)) for path, seen in counts.items()}


def _state_the_tie(report: Report, knowledge: Knowledge) -> None:
    """Two causes at the same score: say so, and name the one question (or probe) that separates them."""
    ranked = report.diagnoses
    if len(ranked) < 2 or _score(ranked[0]) - _score(ranked[1]) >= TIE:
        return
    first, second = ranked[0], ranked[1]
    tie = {"causes": [first.cause, second.cause], "confidence": first.confidence}
    for step in knowledge.tree.separating_questions(first.cause, second.cause, report.triage_path):
        question = knowledge.tree.questions[step]
        if (report.answers.get(step) or {}).get("source") != "user":
            tie.update(question=step, question_text=question.text)
            break
    else:
        probes = [p for p in first.probes if p in second.probes] or list(first.probes) + list(second.probes)
        if probes:
            tie["probe"] = probes[0]
    tie["breaker"] = breaker_words(tie)
    report.verdict.tie = tie


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds // 86400} days"


def _score(diagnosis) -> float:
    return diagnosis.score if diagnosis.score is not None else diagnosis.confidence
