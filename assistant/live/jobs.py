"""The training jobs running on this machine, each summed up in one line (the session's first step)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from debug_stuck.errors import NotInspectable
from debug_stuck.redact import redact_text, redacted_command_line
from debug_stuck.render.text import clip, format_duration

LOG_PEEK_BYTES = 16 * 1024
LOG_PEEK_SECONDS = 2.0


# -- step 1: the job ------------------------------------------------------------------------------


@dataclass
class JobSummary:
    """One training job on this machine, as step 1 lists it."""

    pid: int  # the process to attach to: the launcher when there is one
    pids: List[int]
    launcher: str  # torchrun, accelerate, deepspeed, srun, python...
    ranks: int
    command: str
    started: Optional[float] = None
    gpus: Optional[List[int]] = None  # None: no GPU information on this machine
    log_path: Optional[str] = None
    last_line: Optional[str] = None
    log_mtime: Optional[float] = None
    user: Optional[str] = None
    workers: int = 0  # DataLoader workers (and other children of the trainers that run their code)
    note: Optional[str] = None  # how the PID the user gave led to this job, when it was not the job's own

    def age(self, now: Optional[float] = None) -> Optional[float]:
        return None if self.started is None else (now or time.time()) - self.started

    def log_quiet(self, now: Optional[float] = None) -> Optional[float]:
        return None if self.log_mtime is None else max(0.0, (now or time.time()) - self.log_mtime)

    def headline(self, now: Optional[float] = None) -> str:
        parts = [f"pid {self.pid}"]
        if self.launcher == "python" and self.ranks <= 1:
            parts.append("python, one process (not distributed)")
        else:
            parts += [self.launcher, f"{self.ranks} rank" + ("" if self.ranks == 1 else "s")]
        if self.workers:
            parts.append(f"{self.workers} DataLoader worker" + ("" if self.workers == 1 else "s"))
        if self.gpus:
            parts.append("GPU " + ",".join(map(str, self.gpus)))
        elif self.gpus is not None:
            parts.append("no GPU in use")
        if self.started is not None:
            parts.append(f"up {format_duration(self.age(now))}")
        return " | ".join(parts)

    def log_phrase(self, now: Optional[float] = None, width: int = 70) -> str:
        if not self.log_path:
            return "no log file (stdout and stderr are not files)"
        if self.last_line is None:
            return f"log {Path(self.log_path).name}: empty"
        quiet = format_duration(self.log_quiet(now))
        return f"log quiet for {quiet}: {clip(self.last_line, width)!r}"

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _launcher_name(cmdline: List[str]) -> str:
    text = " ".join(cmdline)
    for needle, name in (
        ("torch.distributed.run", "torchrun"),
        ("torchrun", "torchrun"),
        ("torch.distributed.launch", "torch.distributed.launch"),
        ("accelerate", "accelerate"),
        ("deepspeed", "deepspeed"),
        ("srun", "srun"),
        ("lightning", "lightning"),
    ):
        if needle in text:
            return name
    return "python" if "python" in text.lower() else (Path(cmdline[0]).name if cmdline else "?")


def gpu_map(snapshot) -> Optional[Dict[int, List[int]]]:
    """pid -> GPU indices it has memory on; None when there is no GPU information."""
    if snapshot is None or not snapshot.available:
        return None
    out: Dict[int, List[int]] = {}
    for gp in snapshot.processes:
        if gp.gpu_index >= 0:
            out.setdefault(gp.pid, []).append(gp.gpu_index)
    return out


def climb_to_job(pid: int) -> Tuple[int, Optional[str]]:
    """The trainer process that `pid` works for, and how it was found (see procs.trainer_of), as
    `diagnose --pid` reads the whole job. Raises NotInspectable when `pid` cannot be read."""
    from debug_stuck.probes.collectors.procs import InspectError, trainer_of

    try:
        return trainer_of(pid)
    except InspectError as exc:
        raise NotInspectable(exc.message, "check the PID with ps; give a running process of the job") from None


def summarize_job(pid: int, gpu_map: Optional[Dict[int, List[int]]] = None) -> JobSummary:
    """Describe the job that process `pid` belongs to. Raises NotInspectable."""
    from debug_stuck.probes.collectors.logtail import read_log_tail
    from debug_stuck.probes.collectors.procs import InspectError, job_processes

    try:
        procs = job_processes([pid])
    except InspectError as exc:
        raise NotInspectable(exc.message, "check the PID with ps; give a running process of the job") from None
    pids = [p.pid for p in procs]
    launcher = next((p for p in procs if p.role == "launcher"), None)
    top = launcher or next((p for p in procs if p.ppid not in pids), procs[0])
    ranks = [p for p in procs if p.role == "rank"]
    writers = sorted(ranks, key=lambda p: (p.rank is None, p.rank or 0)) + [top]
    log_path = read_path = None
    for info in writers:
        for fd, kind, target in ((1, info.fd1, info.fd1_target), (2, info.fd2, info.fd2_target)):
            if kind == "file" and target and not target.startswith("/dev/") and not target.endswith(" (deleted)"):
                if log_path is None:  # read the job's own open file, never its path again (mount namespaces)
                    log_path, read_path = target, f"/proc/{info.pid}/fd/{fd}"
    summary = JobSummary(
        pid=top.pid,
        pids=pids,
        launcher=_launcher_name(top.cmdline),
        ranks=len(ranks),
        command=redacted_command_line(top.cmdline)[:300],
        started=top.create_time,
        user=top.username,
        workers=sum(1 for p in procs if p.role == "dataloader-worker"),
    )
    if gpu_map is not None:
        summary.gpus = sorted({i for p in pids for i in gpu_map.get(p, [])})
    if log_path:
        summary.log_path = log_path
        tail = read_log_tail(log_path, max_bytes=LOG_PEEK_BYTES, timeout=LOG_PEEK_SECONDS, read_path=read_path)
        summary.log_mtime = tail.mtime
        if tail.lines:
            summary.last_line = redact_text(tail.lines[-1])
        elif tail.error:
            summary.last_line = tail.error
    return summary


def discover_jobs(extra_pids: Sequence[int] = (), gpu_snapshot=None) -> List[JobSummary]:
    """The training jobs on this machine (Python processes that load libtorch, by family), plus the
    jobs of `extra_pids`; a process that vanished meanwhile is left out."""
    from debug_stuck.probes.collectors.procs import find_training_processes

    gpus = gpu_map(gpu_snapshot)
    jobs: List[JobSummary] = []
    seen: set = set()
    for pid in list(dict.fromkeys(list(extra_pids) + find_training_processes())):
        if pid in seen:
            continue
        try:
            job = summarize_job(climb_to_job(pid)[0], gpus)
        except NotInspectable:
            continue
        seen.update(job.pids)
        jobs.append(job)
    return jobs
