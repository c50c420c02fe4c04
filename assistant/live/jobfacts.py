"""What the job is made of, seen live: the facts the playbooks' `requires_any` / `excluded_when`
read (debug_stuck.core.contradictions names them). Computed over every node's snapshot, so a job
is one process only when it is one process everywhere."""

from __future__ import annotations

import re
from typing import Iterable, List, Optional, Sequence, Set

from debug_stuck.core.libfacts import match_frame, proven_facts

DATALOADER_FILE = re.compile(r"torch/utils/data/")
DISTRIBUTED_FILE = re.compile(r"torch/distributed/")
DATASET_PROTOCOL = "__getitem__"  # what a DataLoader calls on a Dataset, in any job's own code
# The threads a torch.distributed process group starts in its process, by the names torch gives them
# (c10::setThreadName): torch 2.13.0 torch/csrc/distributed/c10d/ProcessGroupGloo.cpp runLoop
# ("pt_gloo_runloop", one per worker of the group), ProcessGroupNCCL.cpp Watchdog::run and
# HeartbeatMonitor::runLoop ("pt_nccl_watchdg", "pt_nccl_heartbt"; 2.2 and later). A process that has
# one is a rank of a process group, whatever its stack shows at the moment it is sampled.
PROCESS_GROUP_THREADS = frozenset({"pt_gloo_runloop", "pt_nccl_watchdg", "pt_nccl_heartbt"})


def in_process_group(info) -> bool:
    """Whether a process runs a thread of a torch.distributed process group (PROCESS_GROUP_THREADS)."""
    return any(name in PROCESS_GROUP_THREADS for name in getattr(info, "thread_names", None) or ())


def snapshot_frames(snap, native: bool = False) -> Iterable:
    """The Python frames (with `native`, every frame) of every thread of the snapshot's latest dumps."""
    for series in snap.stacks.values():
        dump = series.latest()
        for thread in dump.threads if dump is not None else []:
            yield from (f for f in thread.frames if native or not f.native)


def runs_dataloader(snap) -> Optional[bool]:
    """Whether any stack of the snapshot is in torch's DataLoader; None when no stack was read."""
    frames = list(snapshot_frames(snap))
    if not frames:
        return None
    return any(DATALOADER_FILE.search(f.file or "") for f in frames)


def table_facts(frames, frames_table: Sequence[dict]) -> Set[str]:
    """The job facts (skills/data/frames.yaml `facts`) that these frames prove: a frame of
    jax.distributed, Horovod or tf.distribute proves a distributed job as torch.distributed's do."""
    return proven_facts(frames_table, [(frame.function, frame.file) for frame in frames])


def frames_table() -> Optional[List[dict]]:
    """The frame table's entries (skills/data/frames.yaml), or None when it cannot be read (the
    diagnosis reports a broken table itself)."""
    from debug_stuck.errors import KnowledgeError
    from debug_stuck.kb import load_table

    try:
        return load_table("frames.yaml").get("frames") or []
    except KnowledgeError:
        return None


# Waits a library makes by retrying in a loop until they end: torch.distributed.elastic's rendezvous
# (torch 2.13.0 rendezvous/utils.py: _delay between tries, dynamic_rendezvous.py: _RendezvousOpExecutor.run
# loops), filelock's acquire (filelock 4.3.1 _core/_acquire.py: sleep, then try again) and torch's
# FileBaton.wait (torch/utils/file_baton.py: time.sleep while the file exists). Their frames above
# the waiting call change between samples, and they wake and work between sleeps, while nothing moves
# forward. So do the entries the frame table marks `polls` (datasets' iflatmap_unordered, joblib's
# Parallel._retrieve).
RETRY_LOOP_WAITS = frozenset({"rendezvous", "flock", "build-lock"})


def in_library_retry_loop(frames, table: Optional[Sequence[dict]] = None) -> bool:
    """A frame of these is a library's wait that retries or polls in a loop (frames.yaml `polls`, or a
    wait in RETRY_LOOP_WAITS)."""
    table = frames_table() if table is None else table
    if not table:
        return False
    for frame in frames:
        entry = None if frame.native else match_frame(table, frame.function.rsplit(".", 1)[-1], frame.file)
        if entry is not None and (entry.get("wait") in RETRY_LOOP_WAITS or entry.get("polls")):
            return True
    return False


def frames_prove(frames, fact: str) -> bool:
    """Whether these frames prove a job fact of the frame table (`facts`); False without a table."""
    table = frames_table()
    return table is not None and fact in table_facts(frames, table)


def job_facts(snapshots: List, frames_table: Sequence[dict] = (), logged: Sequence[str] = ()) -> Set[str]:
    """`logged`: the log facts (log-catalog.yaml `distributed_facts`) that the job's own logs print:
    one of them is a sign of other ranks as good as their frames."""
    facts: Set[str] = set()
    processes = [p for snap in snapshots for p in snap.processes]
    frames = [f for snap in snapshots for f in snapshot_frames(snap)]
    # a native frame proves a fact too (a TCPStore client's wait has no Python frame of torch's)
    every = [f for snap in snapshots for f in snapshot_frames(snap, native=True)]
    proven = table_facts(every, frames_table) if frames_table else set()
    # a trainer's child counts as a DataLoader's worker where no stack was read, or one shows the DataLoader
    # (a multiprocessing Pool's processes sit in the same place in the tree)
    if any(p.role == "dataloader-worker" for p in processes) and any(
        runs_dataloader(s) is not False for s in snapshots
    ):
        facts.add("worker-process")
    if "dataloader" in proven or any(
        DATALOADER_FILE.search(f.file or "") or f.bare_name == DATASET_PROTOCOL for f in frames
    ):
        facts.add("dataloader-frame")
    ranks = [p for p in processes if p.role == "rank"]
    distributed = (
        len(ranks) > 1
        or any((p.world_size or 0) > 1 for p in processes)
        or "distributed" in proven
        or bool(logged)
        or any(DISTRIBUTED_FILE.search(f.file or "") for f in frames)
        or any(in_process_group(p) for p in processes)
    )
    if distributed:
        facts.add("distributed")
    elif len(processes) == 1 or len(ranks) == 1:
        facts.add("single-process")  # one training process; the workers and children it starts join no group
    gpus = [snap.gpus for snap in snapshots]
    if gpus and all(g is not None and g.vendor is None and not g.available for g in gpus):
        facts.add("no-gpu")  # no vendor library answered at all (a driver that failed still names its vendor)
    return facts
