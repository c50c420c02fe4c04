"""Which processes make up a job: climb from any PID (a worker, a rank) to the job's top process,
and list the whole tree a stop may end (never init, a daemon, or this debug-stuck itself)."""

from __future__ import annotations

import os
from typing import List, Tuple

import psutil

from debug_stuck.errors import NotInspectable
from debug_stuck.recovery.commandline import parse_launch
from debug_stuck.recovery.reading import bounded_read


def read_cmdline(proc: psutil.Process) -> List[str]:
    return bounded_read(proc.cmdline, f"reading /proc/{proc.pid}/cmdline", []) or []


def _is_launcher(cmdline: List[str]) -> bool:
    """The program this command runs is torchrun, accelerate or deepspeed (not merely named in its
    arguments: ``debug-stuck watch -- torchrun ...`` is not a launcher of the job it watches)."""
    return parse_launch(cmdline).launcher != "python"


def _same_job_parent(child: psutil.Process, parent: psutil.Process) -> bool:
    """Is parent part of the same job (its launcher, or the trainer of a worker child)?"""
    from debug_stuck.probes.collectors.procs import COMPILE_WORKER, HELPER_CHILD, SPAWNED_CHILD

    parent_cmd = read_cmdline(parent)
    if not parent_cmd:
        return False
    if _is_launcher(parent_cmd):
        return True
    child_cmd = read_cmdline(child)
    text = " ".join(child_cmd)
    python_parent = "python" in os.path.basename(parent_cmd[0]).lower() or any(
        "python" in os.path.basename(a).lower() for a in parent_cmd[:1]
    )
    if not python_parent:
        return False
    return child_cmd == parent_cmd or bool(
        SPAWNED_CHILD.search(text) or COMPILE_WORKER.search(text) or HELPER_CHILD.search(text)
    )


def job_root(pid: int) -> psutil.Process:
    """The topmost process of the job that pid belongs to (its launcher, or the trainer itself)."""
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        raise NotInspectable(
            f"process {pid} does not exist (it may have exited)",
            'check the PID with ps; for a job that already ended use --cmd "..." --dir DIR',
        ) from None
    except psutil.AccessDenied:
        raise NotInspectable(f"permission denied reading process {pid}", "run as the job's user or root") from None
    for _ in range(16):
        parent = bounded_read(proc.parent, f"finding the parent of {proc.pid}")
        if parent is None or parent.pid <= 1 or not _same_job_parent(proc, parent):
            return proc
        proc = parent
    return proc


def protected_pids() -> set:
    """This process and its ancestors (and init): never signalled, whatever the tree says."""
    pids = {0, 1, os.getpid()}
    try:
        for parent in psutil.Process().parents():
            pids.add(parent.pid)
    except psutil.Error:
        pass
    return pids


def job_tree_pids(pid: int) -> Tuple[int, List[int]]:
    """(root PID, every PID of the job) for the job pid belongs to.

    Raises NotInspectable (exit 3) when there is no such process, or when the tree is not one a stop
    may end: init, a system daemon, or a tree that holds this very process (the user's own shell).
    """
    from debug_stuck.probes.collectors.procs import SESSION_HOLDER, InspectError, job_processes

    root = job_root(pid)
    name = bounded_read(root.name, f"reading the name of {root.pid}", "") or ""
    # a tree rooted at a process that holds other people's work is never a training job
    if root.pid <= 2 or SESSION_HOLDER.match(name):
        raise NotInspectable(
            f"refusing to stop process {root.pid} ({name or 'init'}): it is not a training job", _GIVE_JOB
        )
    try:
        procs = job_processes([root.pid])
    except InspectError as exc:
        raise NotInspectable(exc.message, "check the PID with ps; give a running process") from None
    children = {c.pid for c in bounded_read(lambda: root.children(recursive=True), "listing children", []) or []}
    # root is already the top of the job: a parent job_processes adds for looking like a launcher
    # (a watcher whose arguments name torchrun) is not part of it
    pids = list(dict.fromkeys([root.pid, *(p.pid for p in procs if p.pid in children), *sorted(children)]))
    mine = protected_pids() & set(pids)
    if mine:
        raise NotInspectable(
            f"refusing to stop process {root.pid}: its tree holds this debug-stuck (pid {min(mine)})", _GIVE_JOB
        )
    return root.pid, pids


_GIVE_JOB = "give the PID of the training job (its launcher, a rank or a worker)"


def refuse_unless_a_job(pid: int) -> None:
    """NotInspectable (exit 3) unless `pid` can stand for a training job: not init, a daemon, a
    login shell, this debug-stuck or the shell that runs it, nor a zombie (procs.check_target, the
    rule diagnose applies)."""
    from debug_stuck.probes.collectors.procs import InspectError, check_target, read_process

    try:
        check_target(read_process(pid), [pid])
    except InspectError as exc:
        raise NotInspectable(exc.message, exc.hint or "check the PID with ps; give a running process") from None
