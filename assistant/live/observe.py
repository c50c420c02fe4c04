"""Turn a live Snapshot into what the classifier reads: one line per fact, per source.

Also the things only live evidence can tell: which triage answers the evidence settles, and how
the ranks group by stack (progress is judged in `progress.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional

from debug_stuck.core.answers import Answer
from debug_stuck.core.classify import Observations, ObservedLine
from debug_stuck.core.libfacts import FEEDER_WRITING, feeder_writing
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.jobfacts import DATALOADER_FILE
from debug_stuck.probes.collectors.procs import is_library_helper
from debug_stuck.probes.collectors.stacks import main_thread

GPU_IDLE_UTIL = 5.0
CPU_BUSY = 80.0
CPU_IDLE = 10.0


def fact_role(info, dataloader_job: Optional[bool], dump=None) -> str:
    """The role a playbook reads: a trainer's child is a DataLoader worker only in a job that runs a
    DataLoader. Any forked child gets the role `dataloader-worker` from its place in the tree; when
    the job's stacks show no DataLoader anywhere (`dataloader_job` False), or its own Python stack
    (`dump`, its latest sample) shows none (a multiprocessing.Pool's process beside a DataLoader's
    workers), a dead or stuck child is a `worker-process` (a multiprocessing.Process, a Pool worker),
    not evidence for the DataLoader playbook. Without stacks (`None`) the tree's role stands."""
    if info.role != "dataloader-worker":
        return info.role
    files = [f.file or "" for t in (dump.threads if dump is not None else []) for f in t.frames if not f.native]
    if dataloader_job is False or (files and not any(DATALOADER_FILE.search(file) for file in files)):
        return "worker-process"
    return info.role


# a thread the cgroup freezer holds: Linux kernel/freezer.c __refrigerator (cgroup v1), kernel/signal.c
# do_freezer_trap (cgroup v2's cgroup.freeze)
FREEZER_WCHANS = ("__refrigerator", "do_freezer_trap")


def frozen(info) -> bool:
    """Its threads sit in the cgroup freezer (docker pause, SLURM suspend): a D state that is no I/O;
    read from its cgroup (probes.collectors.freezer), or from a thread parked in the freezer itself."""
    return bool(getattr(info, "frozen", False)) or any(
        w in FREEZER_WCHANS for w in [info.wchan, *(getattr(info, "thread_wchans", None) or {}).values()]
    )


def process_fact(info, motion: Optional[str], shm_ratio: Optional[float], role: Optional[str] = None) -> str:
    def val(x):
        return "na" if x is None else x

    parts = [
        f"role={role or info.role}",
        f"state={'frozen' if frozen(info) else info.state}",
        f"cpu={val(info.cpu_wanted())}",
        f"threads={info.threads}",
        f"wchan={val(info.wchan)}",
        f"fd1={val(info.fd1)}",
        f"fd2={val(info.fd2)}",
        f"stack={motion or 'unknown'}",
    ]
    if shm_ratio is not None:
        parts.append(f"shm_ratio={shm_ratio}")
    return " ".join(parts)


def stack_motion(series, state: str = "") -> Optional[str]:
    if state == "T":  # stopped: a stack reader's attach may wake it into its stop again (live.progress)
        return "frozen"
    if series is None:
        return None
    frozen = series.frozen()
    return None if frozen is None else ("frozen" if frozen else "moving")


def _waits_for_children(dump, tid: int) -> str:
    """`waits=children` when the thread's stack shows a library waiting on the job's own child
    processes (frames.yaml: a pipe or queue wait of multiprocessing's machinery, such as a Pool's
    result handler): its pipe read is how the pool waits for its workers, not a stalled pipe."""
    from debug_stuck.core.libfacts import innermost_wait
    from debug_stuck.live.jobfacts import frames_table

    thread = next((t for t in dump.threads if t.tid == tid), None) if dump is not None else None
    if thread is None:
        return ""
    found = innermost_wait(frames_table() or [], [(f.bare_name, f.file) for f in thread.frames if not f.native])
    entry = found[1] if found else {}
    mine = entry.get("wait") in ("pipe", "queue") and "multiprocess" in (entry.get("facts") or ())
    return " waits=children" if mine else ""


MP_CONNECTION = re.compile(r"(^|/)multiprocess(ing)?/connection\.py$")


def _feeds_queue(dump, tid: int) -> str:
    """`writes=queue` when the thread writes into one of multiprocessing's pipes: a Queue's feeder
    (CPython 3.11.7 Lib/multiprocessing/queues.py Queue._feed), or a send on a Connection (a Pool
    worker putting its result on the pool's SimpleQueue, a Pipe's send). A full pipe there is a
    queue or a peer nobody drains, not the job's stdout or stderr."""
    thread = next((t for t in dump.threads if t.tid == tid), None) if dump is not None else None
    if thread is None:
        return ""
    python = [(f.function, f.file) for f in thread.frames if not f.native]
    sends = any(
        function.rsplit(".", 1)[-1] in ("_send", "_send_bytes", "send_bytes", "send")
        and MP_CONNECTION.search(file or "")
        for function, file in python[:3]
    )
    return " writes=queue" if sends or feeder_writing(python) else ""


def _own_pipe(info, tid: int) -> str:
    """`writes=own` when the thread blocks writing a pipe whose read end only its own process holds
    (an os.pipe() a thread of its own reads, stderr redirected into it): no other process stopped
    reading, so a full pipe there is the process's own wait."""
    wait = info.waits.get(tid) or {}
    peers = wait.get("peers") or []
    if wait.get("op") != "write" or (wait.get("object") or {}).get("kind") != "pipe" or not peers:
        return ""
    return " writes=own" if all(peer.get("pid") == info.pid for peer in peers) else ""


def observe(snap: Snapshot, obs: Observations) -> None:
    shm_ratio = snap.shm.get("ratio") if snap.shm else None
    for pid, beat in snap.heartbeats.items():
        if beat.get("step") is not None and beat["step"] > 0:
            why = f"pid {pid}'s debug_stuck.hook heartbeat reached step {beat['step']}"
            obs.offer_answer(Answer("phase", "mid-run", "evidence"), why)
    from debug_stuck.live.jobfacts import runs_dataloader

    dataloader_job = runs_dataloader(snap)
    for info in snap.processes:
        if is_library_helper(info.cmdline):
            continue  # listed in the report's processes, never evidence
        series = snap.stacks.get(info.pid)
        dump = series.latest() if series is not None else None
        role = fact_role(info, dataloader_job, dump)
        fact = process_fact(info, stack_motion(series, info.state), shm_ratio, role)
        fact += _waits_for_children(dump, info.pid)
        fact += _feeds_queue(dump, info.pid) or _own_pipe(info, info.pid)
        obs.add("process", ObservedLine(fact, subject=info.label(role), pid=info.pid))
        for tid, wchan in info.thread_wchans.items():
            if tid != info.pid:
                line = (
                    f"role={role} thread={tid} wchan={wchan}"
                    + _waits_for_children(dump, tid)
                    + (_feeds_queue(dump, tid) or _own_pipe(info, tid))
                )
                obs.add("process", ObservedLine(line, subject=info.label(role), pid=info.pid))
        if dump is None:
            continue
        for thread in dump.threads:
            who = f"{info.label(role)} thread {thread.name!r}"
            for frame in thread.frames:
                obs.add("stack", ObservedLine(frame.text(), subject=who, pid=info.pid))
            if feeder_writing([(f.function, f.file) for f in thread.frames if not f.native]):
                obs.add("stack", ObservedLine(FEEDER_WRITING, subject=who, pid=info.pid))
    if snap.gpus is not None:
        for device in job_devices(snap):
            obs.add("gpu", ObservedLine(device.fact_line(), subject=f"GPU {device.index}"))
    if snap.kernel is not None:
        from debug_stuck.live.kernel_scope import kernel_verdicts

        # Only lines that belong to this job are evidence (fill_live reports the rest as context).
        for verdict in kernel_verdicts(snap):
            if verdict.belongs:
                obs.add("kernel", ObservedLine(verdict.line, file=snap.kernel.source))
    _derive(snap, obs)


def job_devices(snap: Snapshot) -> list:
    """The GPUs the job's processes hold memory on; every GPU when that is not known (no per-process
    table, as in many containers)."""
    gpus = snap.gpus
    if gpus is None or not gpus.devices:
        return []
    used = snap.job_gpu_indices()
    return [d for d in gpus.devices if not used or d.index in used]


def _derive(snap: Snapshot, obs: Observations) -> None:
    gpus = snap.gpus
    if gpus is not None and gpus.available and gpus.devices:
        devices = job_devices(snap)
        utils = [d.util for d in devices if d.util is not None]
        if utils:
            value = "busy" if max(utils) >= GPU_IDLE_UTIL else "idle"
            obs.offer_answer(
                Answer("gpu", value, "evidence"), f"GPU utilization {', '.join(f'{u:.0f}%' for u in utils)}"
            )
        obs.offer_answer(
            Answer("platform", "cuda" if gpus.vendor == "nvidia" else "rocm", "evidence"), f"{gpus.vendor} GPU present"
        )
    elif gpus is not None and not gpus.available:
        obs.offer_answer(Answer("platform", "cpu", "evidence"), gpus.note or "no GPU on this machine")
    ranks = [p for p in snap.processes if p.role == "rank" and p.cpu_wanted() is not None]
    if ranks:
        top = max(p.cpu_wanted() for p in ranks)
        if top >= CPU_BUSY:
            obs.offer_answer(Answer("cpu", "busy", "evidence"), f"a training process uses {top:.0f}% CPU")
        elif top <= CPU_IDLE:
            obs.offer_answer(Answer("cpu", "idle", "evidence"), f"training processes use at most {top:.0f}% CPU")
    nodes = {p.env.get("SLURM_NODEID") for p in snap.processes if p.env.get("SLURM_NODEID")}
    if len(nodes) > 1:
        obs.offer_answer(Answer("nodes", str(len(nodes)), "evidence"), "Slurm node ids of the ranks")


@dataclass
class StackGroup:
    signature: tuple
    top: str
    pids: List[int]
    ranks: List[Optional[int]]
    frames: List[str] = field(default_factory=list)  # the first member's main-thread frames
    hosts: List[Optional[str]] = field(default_factory=list)  # per member; None on a single-node snapshot
    # a busy rank taken apart from ranks with its Python stack that wait (culprit.apart_from_waiters)
    apart: bool = False

    @property
    def where(self) -> str:
        """The innermost Python function of the group's stack, e.g. "all_reduce"."""
        return self.signature[0][0].rsplit(".", 1)[-1] if self.signature else "(no Python frame)"

    def node_names(self) -> List[str]:
        return list(dict.fromkeys(h for h in self.hosts if h is not None))

    def to_dict(self) -> dict:
        out = {"top": self.top, "pids": self.pids, "ranks": self.ranks, "count": len(self.pids)}
        if self.node_names():
            out["hosts"] = self.hosts
            out["where"] = self.where
        return out


def group_ranks(snap: Snapshot) -> List[StackGroup]:
    """Group training processes by the Python stack of their main thread."""
    groups: Dict[tuple, StackGroup] = {}
    for info in snap.processes:
        own = rank_alone(snap, info.pid)
        if own is None:
            continue
        group = groups.setdefault(own.signature, replace(own, pids=[], ranks=[], hosts=[]))
        group.pids.append(info.pid)
        group.ranks.append(info.rank)
        group.hosts.append(info.host)
    return sorted(groups.values(), key=lambda g: (-len(g.pids), g.pids[0]))


def rank_alone(snap: Snapshot, pid: int) -> Optional[StackGroup]:
    """A rank as a group of its own, with its own frames (a group keeps its first member's: ranks
    waiting in one call from different lines of the job share a group)."""
    info = snap.process(pid)
    if info is None or info.role != "rank":
        return None
    series = snap.stacks.get(pid)
    thread = main_thread(series.latest() if series else None, pid)
    if thread is None:
        return None
    python_frames = [f for f in thread.frames if not f.native]
    signature = tuple((f.function, f.file) for f in python_frames[:12])
    chain = [f.text() if i == 0 else f.text().split(" (", 1)[0] for i, f in enumerate(python_frames[:3])]
    top = " <- ".join(chain) if chain else "(no Python frame)"
    return StackGroup(signature, top, [pid], [info.rank], [f.text() for f in thread.frames], [info.host])


def compress_numbers(numbers) -> str:
    """0,1,2,3,5 -> "0-3,5": runs of three or more become ranges, so 1,024 ranks fit on a line."""
    values = sorted(set(numbers))
    parts, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{values[i]}-{values[j]}")
        else:
            parts.extend(str(v) for v in values[i : j + 1])
        i = j + 1
    return ",".join(parts)


def describe_ranks(group: StackGroup) -> str:
    ranks = [r for r in group.ranks if r is not None]
    if len(ranks) == len(group.ranks) and ranks:
        text = ("rank " if len(ranks) == 1 else "ranks ") + compress_numbers(ranks)
    else:
        text = ("pid " if len(group.pids) == 1 else "pids ") + ",".join(map(str, group.pids))
    nodes = group.node_names()
    if len(nodes) > 2:
        text += f" ({len(nodes)} nodes)"
    elif nodes:
        text += f" ({', '.join(nodes)})"
    return text
