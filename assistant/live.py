"""What live evidence adds to a report: processes, GPUs, progress, stack groups, the culprit."""

from __future__ import annotations

from typing import Dict, List

from assistant.answers import Answer
from assistant.classify import Observations, classify, noisy_or
from assistant.collect import Snapshot
from assistant.culprit import WAITING_CAUSE, find_culprit
from assistant.kb import Knowledge
from assistant.observe import describe_ranks, group_ranks, judge_progress, stack_motion
from assistant.report import Evidence, Report

CULPRIT_WEIGHT = 0.5


def process_entries(snap: Snapshot) -> List[dict]:
    out = []
    for info in snap.processes:
        series = snap.stacks.get(info.pid)
        dump = series.latest() if series is not None else None
        entry = info.to_dict()
        entry["threads"] = [t.to_dict() for t in dump.threads] if dump else []
        entry["stack"] = stack_motion(series) or "unknown"
        if series is not None and series.error:
            entry["stack_error"] = series.error
        out.append(entry)
    return out


def _descendants(snap: Snapshot, pid: int) -> List[int]:
    found, queue = [pid], [pid]
    while queue:
        parent = queue.pop()
        for info in snap.processes:
            if info.ppid == parent and info.pid not in found:
                found.append(info.pid)
                queue.append(info.pid)
    return found


def fill_live(
    report: Report, knowledge: Knowledge, snap: Snapshot, obs: Observations, answers: Dict[str, Answer]
) -> None:
    report.processes = process_entries(snap)
    report.notes = list(snap.notes)
    if snap.gpus is not None:
        report.gpus = [d.to_dict() for d in snap.gpus.devices]
        if not snap.gpus.available:
            report.gpu_note = snap.gpus.note
    report.kernel = list(snap.kernel.lines[-50:]) if snap.kernel is not None else []
    groups = group_ranks(snap)
    report.stack_groups = [dict(g.to_dict(), label=describe_ranks(g)) for g in groups]
    progress = judge_progress(snap)
    verdict = report.verdict
    verdict.hung = progress.hung
    culprit = find_culprit(knowledge, groups)
    if culprit is not None:
        report.culprit = culprit.to_dict()
        own = classify(knowledge, {}, obs.only(_descendants(snap, culprit.pid)))
        primary = next((d for d in own.diagnoses if d.cause != WAITING_CAUSE), None)
        if primary is not None:
            primary.evidence.insert(0, Evidence("stack", culprit.reason, weight=CULPRIT_WEIGHT))
            primary.confidence = round(noisy_or([primary.confidence, CULPRIT_WEIGHT]), 3)
            report.diagnoses = [primary] + [d for d in report.diagnoses if d.cause != primary.cause]
            report.culprit["cause"] = primary.cause
            verdict.cause = primary.cause
            verdict.confidence = primary.confidence
            verdict.phase = knowledge.playbooks[primary.cause].phase
            verdict.summary = (
                f"{describe_ranks(culprit.group).capitalize()} (pid {culprit.pid}) holds the job up: "
                f"{primary.title} ({primary.confidence:.0%}); the other ranks wait for it in a collective."
            )
    if progress.hung is False:
        verdict.cause = None
        verdict.confidence = 0.0
        verdict.summary = "The job is making progress: " + "; ".join(progress.reasons[:2]) + "."
    elif progress.hung:
        verdict.summary += " Evidence of the hang: " + progress.reasons[0] + "."
