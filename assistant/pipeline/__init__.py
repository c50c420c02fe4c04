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
    if request.advice:
        from debug_stuck.advice import advise

        advise(report, knowledge)
    return report


__all__ = ["DiagnoseRequest", "Report", "diagnose"]
