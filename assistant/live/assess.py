"""What live evidence adds to a report: processes, GPUs, progress, stack groups, the culprit."""

from __future__ import annotations

from typing import Dict, List

from debug_stuck.core.answers import Answer
from debug_stuck.core.classify import Observations, classify, noisy_or
from debug_stuck.core.kb import Knowledge
from debug_stuck.core.report import Evidence, Report
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.culprit import WAITING_CAUSE, Culprit, find_culprit
from debug_stuck.live.observe import Progress, describe_ranks, group_ranks, judge_progress, stack_motion

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
    report.verdict.hung = progress.hung
    culprit = find_culprit(knowledge, groups)
    if culprit is not None:
        apply_culprit(report, knowledge, culprit, obs.only(_descendants(snap, culprit.pid)))
    apply_progress(report, progress)


def apply_culprit(report: Report, knowledge: Knowledge, culprit: Culprit, own: Observations) -> None:
    """Name the culprit, and lead with what its own evidence (`own`: its lines only) says it is doing."""
    verdict = report.verdict
    report.culprit = culprit.to_dict()
    result = classify(knowledge, {}, own)
    primary = next((d for d in result.diagnoses if d.cause != WAITING_CAUSE), None)
    if primary is None:
        return
    primary.evidence.insert(0, Evidence("stack", culprit.reason, weight=CULPRIT_WEIGHT))
    primary.confidence = round(noisy_or([primary.confidence, CULPRIT_WEIGHT]), 3)
    report.diagnoses = [primary] + [d for d in report.diagnoses if d.cause != primary.cause]
    report.culprit["cause"] = primary.cause
    verdict.cause = primary.cause
    verdict.confidence = primary.confidence
    verdict.phase = knowledge.playbooks[primary.cause].phase
    who = describe_ranks(culprit.group)
    who = who[:-1] + f", pid {culprit.pid})" if who.endswith(")") else f"{who} (pid {culprit.pid})"
    verdict.summary = (
        f"{who[:1].upper() + who[1:]} holds the job up: "
        f"{primary.title} ({primary.confidence:.0%}); the other ranks wait for it in a collective."
    )


def apply_progress(report: Report, progress: Progress) -> None:
    """A job that progresses is not hung, whatever the stacks look like; a hung one says why."""
    verdict = report.verdict
    if progress.hung is False:
        verdict.cause = None
        verdict.confidence = 0.0
        verdict.summary = "The job is making progress: " + "; ".join(progress.reasons[:2]) + "."
    elif progress.hung:
        verdict.summary += " Evidence of the hang: " + progress.reasons[0] + "."
