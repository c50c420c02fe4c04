"""The pipeline's second stage: what the gathered evidence means. Each node's processes and stacks
are observed and analysed (stack groups, the culprit, the chain to the terminal blocker, progress),
the logs and probe results join them, the playbooks classify the whole once, and the live findings
(one node, or the merge of many) complete the verdict's parts. The verdict's sentence is composed
last, once. No I/O here: everything was read by the gather stage."""

from __future__ import annotations

from typing import List, Optional

from debug_stuck.core.assemble import fill_report
from debug_stuck.core.classify import Observations, ObservedLine, classify
from debug_stuck.core.contradictions import drop_contradicted
from debug_stuck.core.facts import add_facts, logged_facts
from debug_stuck.core.knowledge import Knowledge
from debug_stuck.core.logs import observe_tail
from debug_stuck.core.report import Report
from debug_stuck.core.request import DiagnoseRequest
from debug_stuck.core.verdict import compose
from debug_stuck.pipeline.gather import Gathered


def judge(knowledge: Knowledge, request: DiagnoseRequest, gathered: Gathered) -> Report:
    from debug_stuck.live.assess import analyze, fill_live
    from debug_stuck.live.jobfacts import job_facts
    from debug_stuck.live.merge import NodeAnalysis, combine_nodes, fill_merged, observe_node

    report = Report()
    nodes = gathered.nodes
    per_node: List[NodeAnalysis] = []
    if nodes is not None:
        for node in nodes.answered():
            obs, _ = observe_node(knowledge, node, gathered.local)
            per_node.append(NodeAnalysis(node, obs, None))
    # One node: its observations are the job's, and the logs join them before the analysis (the
    # log's rhythm tells progress). Many: each node is analysed alone, then the lines combined.
    obs = per_node[0].obs if gathered.local and per_node else Observations()
    report.errors.extend(gathered.errors)
    started = _job_started(per_node) if gathered.local else None
    tails, counted = [], False
    for tail in gathered.tails:
        this_run = started is not None and _written_in_this_run(tail, started)
        tails.append(
            observe_tail(knowledge.tree, tail, obs, another_run=not (this_run and counted), live=bool(per_node))
        )
        counted = counted or this_run
    for item in per_node:
        item.live = analyze(knowledge, item.node.snapshot, item.obs, tails)
    if nodes is not None and not gathered.local:
        combined = combine_nodes(nodes, per_node)
        for line_source, lines in obs.lines.items():
            for line in lines:
                combined.add(line_source, line)
        combined.last_steps.extend(obs.last_steps)
        for key, answer in obs.derived.items():
            combined.offer_answer(answer, obs.derived_why.get(key, ""))
        obs = combined
    for result in gathered.probe_results:
        report.probes.append(result.to_dict())
        weigh_probe(result, obs)
    if gathered.torch is not None:
        from debug_stuck.live.torch_evidence import observe_torch_evidence

        observe_torch_evidence(gathered.torch, obs)
    add_facts(knowledge, obs)
    result = classify(knowledge, request.answers, obs)
    # what the job is made of, seen live (and what only a job of several processes logs), rules
    # candidates out (none from logs alone)
    logged = logged_facts(obs, knowledge.distributed_log_facts)
    facts = job_facts([item.node.snapshot for item in per_node], knowledge.frames, logged) if per_node else None
    if gathered.local and per_node:
        per_node[0].live.facts = facts  # its culprit's own evidence is read against them (fill_live)
    ruled_out = drop_contradicted(knowledge, result, facts)
    fill_report(report, knowledge, result, tails, obs)
    report.suggested_answers = {
        key: {"value": answer.value, "source": answer.source, "why": obs.derived_why.get(key, "")}
        for key, answer in obs.derived.items()
    }
    if gathered.local and per_node:
        item = per_node[0]
        fill_live(report, knowledge, item.node.snapshot, obs, item.live)
    elif nodes is not None:
        fill_merged(report, knowledge, nodes, per_node)
    if gathered.torch is not None:
        from debug_stuck.live.torch_evidence import fill_torch_evidence

        fill_torch_evidence(report, gathered.torch)
    report.notes.extend(ruled_out)
    if report.verdict.state == "progressing":
        report.next_questions = []  # when and where it stopped: nothing to ask of a job that moves
    report.verdict.summary = compose(report.verdict, report.diagnoses)
    return report


def weigh_probe(result, obs: Observations) -> None:
    """A probe's result as evidence: its fact lines and its findings."""
    for line in result.fact_lines():
        obs.add("probe", ObservedLine(line))
    obs.findings.extend((result.name, f) for f in result.findings)


def judge_nodes(knowledge: Knowledge, nodes, request: DiagnoseRequest = None) -> Report:
    """The judge stage on snapshots already collected from many nodes (a MergedSnapshot)."""
    return judge(knowledge, request or DiagnoseRequest(), Gathered(nodes=nodes))


def _job_started(per_node) -> Optional[float]:
    """When the live job's first process started (its run began then)."""
    times = [p.create_time for item in per_node for p in item.node.snapshot.processes if p.create_time]
    return min(times, default=None)


def _written_in_this_run(tail, started: float) -> bool:
    """A log of the live job's own run: a file it holds open, or one written since it started."""
    return bool(tail.read_path) or (tail.mtime is not None and tail.mtime >= started)
