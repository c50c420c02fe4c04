"""Which kernel log lines belong to the job of a snapshot: the job's marks read from the snapshot,
the judgement itself in debug_stuck.probes.collectors.kernel_scope (a probe judges with it too)."""

from __future__ import annotations

from typing import List

from debug_stuck.probes.collectors.kernel_scope import (  # noqa: F401 (the judgement, named here too)
    JobScope,
    KernelVerdict,
    gpu_busids_of,
    judge_line,
    judge_lines,
    line_time,
    normalize_busid,
    scope_of_processes,
)

MAX_CONTEXT_NOTES = 2  # context, not cause: the latest two, the rest counted


def scope_of(snap) -> JobScope:
    """The job's marks, from a snapshot: its PIDs and cgroups, when it started, the GPUs its
    processes hold memory on, the NFS servers mounted where it runs."""
    return scope_of_processes(snap.processes, snap.gpus, getattr(snap, "nfs_servers", None) or [])


def kernel_verdicts(snap) -> List[KernelVerdict]:
    """Every flagged kernel line of the snapshot, judged against its job."""
    if snap.kernel is None:
        return []
    from debug_stuck.probes.collectors.kernel import interesting_tagged

    tagged = interesting_tagged(snap.kernel.lines)
    return judge_lines(tagged, scope_of(snap), getattr(snap.kernel, "boot_time", None), now=snap.taken_at or None)


def context_notes(verdicts: List[KernelVerdict]) -> List[str]:
    """The latest flagged lines that do not count against the job, with why (context, not cause)."""
    context = [v for v in verdicts if not v.belongs]
    notes = [f"kernel log, not counted against this job ({v.why}): {v.line.strip()[:240]}" for v in context]
    if len(notes) > MAX_CONTEXT_NOTES:
        dropped = len(notes) - MAX_CONTEXT_NOTES
        notes = notes[-MAX_CONTEXT_NOTES:] + [
            f"kernel log: {dropped} earlier line(s) not counted against this job left out"
        ]
    return notes
