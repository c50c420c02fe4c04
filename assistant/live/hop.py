"""One hop of a wait chain: a thread of a process, what it waits on and how that wait ends, with the
report's view of it (to_dict) and the classifier's (fact_line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from debug_stuck.live.jobfacts import DATALOADER_FILE

# the hop facts a report's waits_on carries (docs/contract.md, chain)
WAIT_FACTS = (
    "end", "fd", "state", "master", "gc", "loop", "via", "lockfile", "stdin", "exit", "body", "event_loop",
    "forked_by", "gil", "receiving", "peer", "lock", "lock_module", "key", "set_key", "set_at", "setter", "event",
    "awaited", "awaited_at", "primitive", "created_at", "completes", "holder_thread", "holder_at",
    "manager", "setter_pid", "dead_child", "sleep_left", "async_locks", "lock_orders", "prompt",
    "barrier_parties", "barrier_at", "barrier_waits", "preexec", "set_in_thread", "held_across_await", "followed",
    "queue", "notify_at", "sentinel", "queued", "submitted_at", "cleared_event", "cleared_at", "filled_by", "callback",
    "spin_loop", "spin_at", "held_signals", "mask_from", "mask_at", "own_server", "polled", "reaper", "sending",
    "parent_pid", "putter", "put_at", "iterable", "reader", "put_by", "waited", "skip_at",
    "task_done_at", "joined_at", "semaphore", "leak_at", "acquired_at",
    "awaited_lock", "stop_signal", "tty_call",
)  # fmt: skip


@dataclass
class Hop:
    pid: int
    role: str
    rank: Optional[int]
    tid: Optional[int]
    thread: Optional[str]
    where: Optional[str]  # the innermost Python frame, "function (file:line)"
    inside: List[str] = field(default_factory=list)  # the Python functions around it, innermost first
    kind: str = "unknown"  # what it waits on: fifo, pipe, file, socket, process, lock, thread, rank,
    # worker, child, sleep, cpu, futex, unknown
    object: Optional[str] = None
    detail: str = ""
    op: Optional[str] = None
    evidence: List[str] = field(default_factory=list)
    facts: Dict[str, str] = field(default_factory=dict)  # for the classifier's "chain" lines
    terminal: bool = False
    frames: list = field(default_factory=list, repr=False)  # the thread's frames, innermost first
    host: Optional[str] = None  # on a job of several nodes
    group: Optional[str] = None  # "ranks 0,2,3": the hop stands for every rank of a stack group
    dataloader_job: bool = True  # some process of the job is in a DataLoader (a dead worker has no frames)
    parties: List[dict] = field(default_factory=list)  # lock-cycle: each waiting thread and its frame
    program: Optional[str] = None  # a process of the job that runs no Python (sh, git, a compiler): its name

    @property
    def who(self) -> str:
        if self.group:
            return self.group
        where = f"{self.host}, " if self.host else ""
        label = f"rank {self.rank} ({where}pid {self.pid})" if self.role == "rank" and self.rank is not None else None
        if label is None:
            role = {"dataloader-worker": "DataLoader worker", "launcher": "the launcher"}.get(self.role, "process")
            if self._worker_outside_dataloader():
                role = "worker process"
            label = f"{role} pid {self.pid}" + (f" (rank {self.rank})" if self.rank is not None else "")
            label += f" ({self.program})" if self.program else ""
            label += f" on {self.host}" if self.host else ""
        if self.thread and self.tid and self.tid != self.pid:
            label += f", thread {self.thread!r}"
        return label

    def _worker_outside_dataloader(self) -> bool:
        """A forked child of the trainer (role dataloader-worker from its place in the tree) that runs
        no DataLoader: its own frames say so, or, without frames (a dead worker), the whole job's."""
        if self.role != "dataloader-worker":
            return False
        if self.frames:
            return not any(DATALOADER_FILE.search(f.file or "") for f in self.frames if not f.native)
        return not self.dataloader_job

    @property
    def reported_role(self) -> str:
        """The role the report and the playbooks read: a worker outside any DataLoader is a worker-process."""
        return "worker-process" if self._worker_outside_dataloader() else self.role

    def to_dict(self) -> dict:
        out = {
            "pid": self.pid,
            "role": self.reported_role,
            "rank": self.rank,
            "thread": {"tid": self.tid, "name": self.thread} if self.tid else None,
            "where": self.where,
            "waits_on": {"kind": self.kind, "object": self.object, "detail": self.detail},
            "evidence": list(self.evidence),
            "who": self.who,
        }
        # what the advice keys its remedy on (debug_stuck.advice.remedy): the system call, how the
        # wait ends (no-writer, no-accept, deadlock...), and for a lock cycle each thread's frame
        for key in ("op",):
            if getattr(self, key):
                out["waits_on"][key] = getattr(self, key)
        for key in WAIT_FACTS:
            if self.facts.get(key):
                out["waits_on"][key] = self.facts[key]
        if self.parties:
            out["waits_on"]["threads"] = [dict(p) for p in self.parties]
        if self.host:
            out["host"] = self.host
        if self.terminal:
            out["terminal"] = True
        return out

    def fact_line(self) -> str:
        """One line for the classifier (playbook signals with `source: chain` match it)."""
        parts = [f"hop={'terminal' if self.terminal else 'link'}", f"role={self.reported_role}", f"kind={self.kind}"]
        if self.op:
            parts.append(f"op={self.op}")
        parts += [f"{k}={v}" for k, v in self.facts.items()]
        parts.append("in=" + ",".join(self.inside[:8]))
        return " ".join(parts)
