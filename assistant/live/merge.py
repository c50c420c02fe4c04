"""The merge stage of the pipeline, for a job on many nodes: global ranks, stack groups across every
node, the culprit rank and node, and the nodes that did not answer as evidence."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

from debug_stuck.core.answers import Answer
from debug_stuck.core.classify import Observations
from debug_stuck.core.knowledge import Knowledge
from debug_stuck.core.report import Evidence, Report
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.nodes import MergedSnapshot, NodeSnapshot
from debug_stuck.live.observe import StackGroup, compress_numbers, describe_ranks
from debug_stuck.live.progress import Progress

MAX_LISTED = 40  # notes and kernel lines gathered from many nodes are capped at this many


def _int(value) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _place(node: NodeSnapshot) -> None:
    """Name each process's node, and give srun-started ranks their global rank."""
    snap = node.snapshot
    by_pid = {p.pid: p for p in snap.processes}
    for info in snap.processes:
        info.host = node.node
        if info.role == "rank" and info.rank is None:
            info.rank = _int(info.env.get("SLURM_PROCID"))
    for info in snap.processes:
        parent = by_pid.get(info.ppid)
        if info.role == "dataloader-worker" and info.rank is None and parent is not None:
            info.rank = parent.rank


def merge_groups(groups: Iterable[StackGroup]) -> List[StackGroup]:
    """Stack groups of every node joined by stack signature (a busy rank taken apart from the ranks
    that wait with the same Python stack stays apart); members ordered by rank."""
    merged: Dict[tuple, StackGroup] = {}
    for g in groups:
        key = (g.signature, g.apart)
        into = merged.get(key)
        if into is None:
            merged[key] = StackGroup(g.signature, g.top, list(g.pids), list(g.ranks), g.frames, list(g.hosts), g.apart)
            continue
        into.pids += g.pids
        into.ranks += g.ranks
        into.hosts += g.hosts
    out = []
    for g in merged.values():
        rank_order = [(r is None, r if r is not None else 0) for r in g.ranks]
        order = sorted(range(len(g.pids)), key=lambda i: (rank_order[i], g.hosts[i] or "", g.pids[i]))
        g.pids = [g.pids[i] for i in order]
        g.ranks = [g.ranks[i] for i in order]
        g.hosts = [g.hosts[i] for i in order]
        out.append(g)

    def first(g: StackGroup) -> int:
        known = [r for r in g.ranks if r is not None]
        return min(known) if known else g.pids[0]

    return sorted(out, key=lambda g: (-len(g.pids), first(g)))


def _combine_observations(parts: List[Observations]) -> Observations:
    """One set of observations for the whole job; a line seen on many ranks is kept once (the
    classifier then reads a few hundred distinct lines, not one copy per rank)."""
    out = Observations()
    seen = set()
    for obs in parts:
        for source, lines in obs.lines.items():
            for line in lines:
                key = (source, line.text, line.file, line.line)
                if key in seen:
                    continue
                seen.add(key)
                out.add(source, line)
        for key, answer in obs.derived.items():
            current = out.derived.get(key)
            stronger = (
                current is None
                or (key in ("gpu", "cpu") and answer.value == "busy" and current.value != "busy")
                or (key == "platform" and current.value == "cpu" and answer.value != "cpu")
            )
            if stronger:
                out.derived[key] = answer
                out.derived_why[key] = obs.derived_why.get(key, "")
        out.findings.extend(obs.findings)
        out.last_steps.extend(obs.last_steps)
    return out


def _combine_progress(per_node: List[Tuple[str, Progress]]) -> Progress:
    """The job's state from its nodes': any node progressing (or slow) makes the job progress;
    hung only when every node that could tell says so."""
    moving = [(name, p) for name, p in per_node if p.hung is False]
    if moving:
        slow = next((p for _, p in moving if p.state == "slow"), None)
        reasons = [f"{name}: {reason}" for name, p in moving for reason in p.reasons]
        if slow is not None and all(p.state == "slow" for _, p in moving):
            return Progress(False, reasons, state="slow", slow_because=slow.slow_because)
        return Progress(False, reasons)
    hung = [(name, p) for name, p in per_node if p.hung]
    if hung:
        what = hung[0][1].reasons[0] if hung[0][1].reasons else "nothing moved"
        where = f", on all {len(per_node)} nodes that answered" if len(per_node) > 1 else ""
        stuck_on = [pid for _, p in hung for pid in p.stuck_on]
        return Progress(True, [what + where], stuck_on=stuck_on)
    return Progress(None, ["too little was sampled to tell"])


def _capped(items: List[str], what: str) -> List[str]:
    if len(items) <= MAX_LISTED:
        return items
    return items[:MAX_LISTED] + [f"... {len(items) - MAX_LISTED} more {what}"]


def groups_line(groups: List[StackGroup], limit: int = 6) -> str:
    """One line for the groups: ranks 0-61,63 (8 nodes) in all_reduce / rank 62 (node-7) in __getitem__."""
    parts = [f"{describe_ranks(g)} in {g.where}" for g in groups[:limit]]
    if len(groups) > limit:
        parts.append(f"{len(groups) - limit} more groups")
    return " / ".join(parts)


@dataclass
class NodeAnalysis:
    """One node's share of the job: its snapshot, what was observed on it and what the analysis made of it."""

    node: NodeSnapshot
    obs: Observations
    live: object  # debug_stuck.live.assess.LiveAnalysis


def observe_node(knowledge: Knowledge, node: NodeSnapshot, local: bool) -> Tuple[Observations, Snapshot]:
    """A node's observations. On many nodes every process is named with its node and srun's ranks get
    their global rank; observe() is handed the kernel lines that matter, as the node flagged them."""
    from debug_stuck.live.observe import observe

    snap = node.snapshot
    if not local:
        _place(node)
        flagged = node.kernel_lines
        if flagged is None:
            flagged = snap.kernel.interesting() if snap.kernel is not None else []
        if snap.kernel is not None:
            snap = dataclasses.replace(snap, kernel=dataclasses.replace(snap.kernel, lines=list(flagged)))
    obs = Observations()
    observe(snap, obs)
    return obs, snap


def combine_nodes(merged: MergedSnapshot, per_node: List[NodeAnalysis]) -> Observations:
    """One set of observations for the whole job (a line many ranks share kept once), with the
    number of nodes as evidence when there are several."""
    combined = _combine_observations([n.obs for n in per_node])
    if len(merged.nodes) > 1:
        combined.offer_answer(Answer("nodes", str(len(merged.nodes)), "evidence"), f"{merged.target}")
    return combined


def fill_merged(report: Report, knowledge: Knowledge, merged: MergedSnapshot, per_node: List[NodeAnalysis]) -> None:
    """The merge stage: the whole job from every node's analysis, once classified. What is missing is
    said, not hidden: a node that did not answer is evidence of its own."""
    from debug_stuck.live.assess import (
        apply_chain,
        apply_culprit,
        apply_mismatch,
        apply_progress,
        descendants,
        process_entries,
    )
    from debug_stuck.live.chain import build_chains
    from debug_stuck.live.culprit import find_culprit, find_mismatch, find_p2p_deadlock, waits_in_collective
    from debug_stuck.live.observe import rank_alone

    answered = [n.node for n in per_node]
    node_obs = {n.node.node: n.obs for n in per_node}
    node_snaps = {n.node.node: n.node.snapshot for n in per_node}
    groups = [g for n in per_node for g in n.live.groups]
    kernel: List[str] = []
    for node in answered:
        snap = node.snapshot
        flagged = node.kernel_lines
        if flagged is None:
            flagged = snap.kernel.interesting() if snap.kernel is not None else []
        kernel += [f"{node.node}: {line}" for line in flagged]

    report.processes = [entry for node in answered for entry in process_entries(node.snapshot)]
    report.gpus = [
        dict(d.to_dict(), host=node.node) for node in answered if node.snapshot.gpus for d in node.snapshot.gpus.devices
    ]
    if not report.gpus:
        report.gpu_note = next(
            (n.snapshot.gpus.note for n in answered if n.snapshot.gpus is not None and n.snapshot.gpus.note), None
        )
    report.kernel = kernel[-50:]
    notes = [f"{node.node}: {note}" for node in answered for note in node.snapshot.notes]
    errors = [f"{node.node}: {error}" for node in answered for error in node.snapshot.errors]

    merged_groups = merge_groups(groups)
    report.stack_groups = [dict(g.to_dict(), label=describe_ranks(g)) for g in merged_groups]
    overall = _combine_progress([(n.node.node, n.live.progress) for n in per_node])
    report.verdict.hung = overall.hung
    culprit = find_culprit(knowledge, merged_groups)
    mismatch = find_mismatch(knowledge, merged_groups) if culprit is None else None
    if culprit is None and mismatch is None:
        sizes = [p.world_size for n in answered for p in n.snapshot.processes if p.role == "rank" and p.world_size]
        alone = lambda pid, host: rank_alone(node_snaps[host], pid) if host in node_snaps else None  # noqa: E731
        mismatch = find_p2p_deadlock(knowledge, merged_groups, alone, max(sizes) if sizes else None)
    chains = []
    if culprit is not None and culprit.host in node_snaps:
        own = node_obs[culprit.host].only(descendants(node_snaps[culprit.host], culprit.pid))
        apply_culprit(report, knowledge, culprit, own)
        chains = build_chains(node_snaps[culprit.host], merged_groups, culprit)
    elif mismatch is not None:
        apply_mismatch(report, knowledge, mismatch)
    else:
        chains = [chain for n in per_node for chain in n.live.chains]
    report.chains = [[hop.to_dict() for hop in c.hops] for c in chains]
    report.chain = report.chains[0] if report.chains else []
    apply_chain(report, chains[0] if chains else None)
    apply_progress(report, overall)

    # The nodes that did not answer: evidence in their own right.
    missing = merged.missing()
    seen_ranks = {p.rank for n in answered for p in n.snapshot.processes if p.role == "rank" and p.rank is not None}
    sizes = [p.world_size for n in answered for p in n.snapshot.processes if p.world_size]
    unseen = sorted(set(range(max(sizes))) - seen_ranks) if sizes and max(sizes) <= 1 << 20 else []
    for node in missing:
        errors.append(f"{node.node}: {node.error}")
    if missing:
        names = ", ".join(n.node for n in missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        what = f"{len(missing)} of {len(merged.nodes)} nodes gave no snapshot: {names}"
        if unseen:
            what += f"; ranks {compress_numbers(unseen)} were not seen"
        evidence = Evidence("process", what + " (a dead or wedged node is a suspect of its own)")
        if report.diagnoses:
            report.diagnoses[0].evidence.append(evidence)
        notes.insert(0, what)
        waiting = merged_groups and all(waits_in_collective(knowledge, g) for g in merged_groups)
        if culprit is None and answered and waiting:
            report.verdict.silent_nodes = (
                f"Every rank that answered waits in a collective; {names} did not answer"
                + (f" (ranks {compress_numbers(unseen)} unseen)" if unseen else "")
                + ": look there first, the rank that holds the others up is probably on it."
            )
    if not answered:
        report.verdict.hung = None
        report.verdict.cause = None
        report.verdict.confidence = 0.0
        report.verdict.no_nodes = f"No node of {merged.target} gave a snapshot; see the errors for why."
    head = f"{merged.target}: {len(answered)} of {len(merged.nodes)} node(s) answered in {merged.seconds:.1f} s"
    if merged_groups:
        head += f"; stack groups: {groups_line(merged_groups)}"
    report.notes = [head] + _capped(notes, "notes")
    report.missing = [
        dict(item, what=f"{node.node}: {item.get('what')}") for node in answered for item in node.snapshot.missing
    ][:MAX_LISTED]
    report.errors = list(merged.errors) + _capped(errors, "errors") + report.errors
