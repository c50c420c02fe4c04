"""The one diagnosis pipeline: `diagnose(request) -> Report`, for every front end.

gather (everything read: the job's processes on one node or many, its logs, the probes asked for)
-> judge (observations, analysis, the merge of many nodes, the playbooks' classification, the
verdict composed once) -> the resume plan and the advice for this job -> secrets redacted.
The CLI's diagnose, fix and demo, the interactive session, stop's report and watch's incident
report all call it, and nothing else of the pipeline.
"""

from __future__ import annotations

from typing import Optional

from debug_stuck.core.knowledge import Knowledge
from debug_stuck.core.report import Report
from debug_stuck.core.request import DiagnoseRequest
from debug_stuck.pipeline.quick import quick_cause


def diagnose(request: DiagnoseRequest, knowledge: Optional[Knowledge] = None) -> Report:
    from debug_stuck.kb import load_knowledge
    from debug_stuck.pipeline.gather import gather
    from debug_stuck.pipeline.judge import judge

    knowledge = knowledge or load_knowledge()
    gathered = gather(request)
    if request.progress and gathered.nodes is not None and not gathered.local:
        request.progress("classifying")
    report = judge(knowledge, request, gathered)
    report.notes[:0] = request.notes
    report.redact()
    if request.resume_plan is not None:
        from debug_stuck.redact import redact_obj

        report.resume = redact_obj(request.resume_plan)
    elif request.resume and gathered.local and report.processes:
        from debug_stuck.recovery.plan import add_resume

        add_resume(report, request.resume_pid or report.processes[0]["pid"])
    if report.resume:
        from debug_stuck.recovery.plan import mark_finished

        mark_finished(report)
    if request.advice:
        from debug_stuck.advice import advise

        advise(report, knowledge)
    return report


def report_without_diagnosis(pid: int, failure: str) -> Report:
    """When the diagnosis itself failed: the failure, the job's process table (evidence of what
    there was) and the way back (the resume plan), which matters most then."""
    from debug_stuck.recovery.plan import add_resume

    report = Report()
    report.errors.append(failure)
    try:
        from debug_stuck.probes.collectors.procs import job_processes, read_states

        procs = job_processes([pid])
        read_states(procs)
        report.processes = [p.to_dict() for p in procs]
    except Exception as exc:
        report.errors.append(f"could not read the processes: {exc}")
    add_resume(report, pid)
    return report


__all__ = ["DiagnoseRequest", "Report", "diagnose", "quick_cause", "report_without_diagnosis"]
