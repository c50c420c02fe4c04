"""What the job is made of, seen live: the facts the playbooks' `requires_any` / `excluded_when`
read (debug_stuck.core.contradictions names them). Computed over every node's snapshot, so a job
is one process only when it is one process everywhere."""

from __future__ import annotations

import re
from typing import Iterable, List, Set

DATALOADER_FILE = re.compile(r"torch/utils/data/")
DISTRIBUTED_FILE = re.compile(r"torch/distributed/")
DATASET_PROTOCOL = "__getitem__"  # what a DataLoader calls on a Dataset, in any job's own code


def _frames(snap) -> Iterable:
    for series in snap.stacks.values():
        dump = series.latest()
        for thread in dump.threads if dump is not None else []:
            yield from (f for f in thread.frames if not f.native)


def job_facts(snapshots: List) -> Set[str]:
    facts: Set[str] = set()
    processes = [p for snap in snapshots for p in snap.processes]
    frames = [f for snap in snapshots for f in _frames(snap)]
    if any(p.role == "dataloader-worker" for p in processes):
        facts.add("worker-process")
    if any(DATALOADER_FILE.search(f.file or "") or f.bare_name == DATASET_PROTOCOL for f in frames):
        facts.add("dataloader-frame")
    ranks = [p for p in processes if p.role == "rank"]
    distributed = (
        len(ranks) > 1
        or any((p.world_size or 0) > 1 for p in processes)
        or any(DISTRIBUTED_FILE.search(f.file or "") for f in frames)
    )
    if distributed:
        facts.add("distributed")
    elif len(processes) == 1:
        facts.add("single-process")
    return facts
