"""What a diagnosis is asked to look at: answers, logs, live processes on this machine or on every
node of a job, probes; and what to add to the report (the resume plan, the advice)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from debug_stuck.core.answers import Answer


@dataclass
class DiagnoseRequest:
    answers: Dict[str, Answer] = field(default_factory=dict)
    logs: List[str] = field(default_factory=list)
    log_bytes: Optional[int] = None
    pids: List[int] = field(default_factory=list)
    auto: bool = False
    window: float = 1.0
    samples: int = 2
    native: bool = True
    progress: Optional[Callable[[str], None]] = None
    probes: List[str] = field(default_factory=list)  # targeted probes to run as part of the diagnosis
    # probes that already ran (ProbeResult.to_dict()): weighed like those run here, not run again
    probe_results: List[dict] = field(default_factory=list)
    allow_exec: bool = False
    # Many nodes: every node of a Slurm job, or these hosts over ssh (with pids, auto or slurm_job
    # naming the job's processes on each); the same options mean the same as on one node.
    hosts: List[str] = field(default_factory=list)
    slurm_job: Optional[str] = None
    node_timeout: Optional[float] = None
    ssh_options: List[str] = field(default_factory=list)
    # PyTorch's own evidence: Flight Recorder dumps (folders, prefixes or files; the job's own are
    # found from its environment), and torch's debug server (host:port; found when the job listens)
    flight_recorder: List[str] = field(default_factory=list)
    debug_server: Optional[str] = None
    # What the report gets besides the diagnosis: the resume plan of a live job, the advice filled
    # for the job. A front end that only wants the evidence (the session's first look) turns them off.
    resume: bool = True
    advice: bool = True
    resume_pid: Optional[int] = None  # whose job to plan the resume for (default: the first process)
    resume_plan: Optional[dict] = None  # a plan the caller made already (watch knows its own job's command)
    notes: List[str] = field(default_factory=list)  # said first in the report's notes (why it was written)

    @property
    def many_nodes(self) -> bool:
        return bool(self.hosts) or bool(self.slurm_job)

    @property
    def live(self) -> bool:
        return bool(self.pids) or self.auto or self.many_nodes

    @property
    def torch_evidence(self) -> bool:
        return bool(self.flight_recorder) or bool(self.debug_server)
