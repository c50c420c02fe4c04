"""Quick looks for the interactive session, outside a diagnosis: the training jobs on this machine
(one line each, with their log's last line) and a GPU reading for the sparklines. Bounded like
everything the pipeline reads."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from debug_stuck.live.jobs import JobSummary


def find_jobs(extra_pids: Sequence[int] = (), gpu_snapshot=None) -> list:
    from debug_stuck.live.jobs import discover_jobs

    return discover_jobs(extra_pids, gpu_snapshot)


def describe_job(pid: int, gpu_snapshot=None):
    """(the job `pid` belongs to, the trainer it climbed to, how it was found): a DataLoader
    worker's PID stands for its whole job, as in `diagnose --pid`."""
    from debug_stuck.live.jobs import climb_to_job, gpu_map, summarize_job

    top, note = climb_to_job(pid)
    return summarize_job(top, gpu_map(gpu_snapshot)), top, note


def read_gpus(timeout: float, samples: int = 1):
    from debug_stuck.probes.collectors.gpu.collect import collect_gpus

    return collect_gpus(timeout=timeout, samples=samples)


def job_gpus(gpu_snapshot) -> Optional[dict]:
    from debug_stuck.live.jobs import gpu_map

    return gpu_map(gpu_snapshot)


def node_snapshot(
    pids: Sequence[int], auto: bool, slurm_job: Optional[str], window: float, native: bool
) -> Tuple[dict, int, Optional[str]]:
    """This node's evidence for a diagnosis of many nodes, as one JSON-ready record for the wire:
    (record, exit code, the error in one line or None). A node that cannot answer still says which
    node it is and why."""
    from debug_stuck.errors import BadInput, DebugStuckError
    from debug_stuck.live.snapshot import JOB_ID, node_name, take_snapshot
    from debug_stuck.live.wire import error_to_wire

    if slurm_job and not JOB_ID.match(slurm_job):
        raise BadInput(f"--slurm-job {slurm_job!r} is not a Slurm job id", "give the number squeue shows")
    try:
        wire = take_snapshot(pids=list(pids), auto=auto, slurm_job=slurm_job, window=window, native=native)
        return wire, 0, None
    except DebugStuckError as exc:
        wire = error_to_wire(exc.one_line(), exc.exit_code, node=node_name(), job=slurm_job)
        return wire, exc.exit_code, exc.one_line()


__all__: List[str] = ["JobSummary", "describe_job", "find_jobs", "job_gpus", "node_snapshot", "read_gpus"]
