"""The diagnosis pipeline every front end shares: gather (logs, live processes, probes), classify,
build the report. The resume plan is recovery's addition (debug_stuck.recovery.plan.add_resume)."""

from __future__ import annotations

from typing import Optional

from debug_stuck.core.assemble import fill_report
from debug_stuck.core.classify import Observations, ObservedLine, classify
from debug_stuck.core.kb import Knowledge, load_knowledge
from debug_stuck.core.logs import observe_log
from debug_stuck.core.report import Report
from debug_stuck.core.request import DiagnoseRequest
from debug_stuck.errors import BadInput


def run_diagnosis(request: DiagnoseRequest, knowledge: Optional[Knowledge] = None) -> Report:
    knowledge = knowledge or load_knowledge()
    obs = Observations()
    report = Report()
    snap = None
    logs = [(path, None) for path in request.logs]
    if request.live:
        from debug_stuck.live.collect import collect
        from debug_stuck.live.observe import observe

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
        logs = [(lg.path, lg.read_path) for lg in snap.logs if lg.text_log]
        report.errors.extend(snap.errors)
    tails = [observe_log(knowledge.tree, path, obs, request.log_bytes, read_path) for path, read_path in logs]
    for tail in tails:
        if tail.error:
            report.errors.append(tail.error)
    live = None
    if snap is not None:
        from debug_stuck.live.assess import analyze

        live = analyze(knowledge, snap, obs, tails)
    for result in run_requested_probes(request, obs):
        report.probes.append(result.to_dict())
    result = classify(knowledge, request.answers, obs)
    fill_report(report, knowledge, result, tails)
    if snap is not None:
        from debug_stuck.live.assess import fill_live

        fill_live(report, knowledge, snap, obs, live)
    return report.redact()


def run_requested_probes(request: DiagnoseRequest, obs: Observations):
    """Run the probes asked for; their findings become evidence. Consent is checked up front.
    Results of probes that already ran (request.probe_results) are weighed the same way, and those
    probes are not run again."""
    if not request.probes and not request.probe_results:
        return []
    from debug_stuck.probes.targeted.base import ProbeContext, ProbeResult, ProbeUsageError
    from debug_stuck.probes.targeted.registry import given_inputs, probe_spec, run_probe

    results = [_weigh(ProbeResult.from_dict(data), obs) for data in request.probe_results]
    done = {r.name for r in results}
    runs = []
    for name in request.probes:
        if name in done:
            continue
        try:
            spec = probe_spec(name)
        except ProbeUsageError as exc:
            raise BadInput(str(exc)) from None
        ctx = ProbeContext(timeout=spec.timeout, allow_exec=request.allow_exec, pids=list(request.pids))
        if spec.runs_user_code_with(given_inputs(ctx)) and not request.allow_exec:
            raise BadInput(f"probe {name!r} runs your code", "add --allow-exec to consent, or leave that probe out")
        runs.append((spec, ctx))
    for spec, ctx in runs:
        if request.progress:
            request.progress(f"running probe {spec.name}")
        results.append(_weigh(run_probe(spec.name, ctx), obs))
    return results


def _weigh(result, obs: Observations):
    """A probe's result as evidence: its fact lines and its findings."""
    for line in result.fact_lines():
        obs.add("probe", ObservedLine(line))
    obs.findings.extend((result.name, f) for f in result.findings)
    return result
