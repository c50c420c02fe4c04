"""Stop a hung job safely: write the diagnosis report first (evidence before teardown), then end
the job's whole process tree by PID: SIGINT, wait, SIGTERM, wait, freeze, SIGKILL. Each PID is
checked to still be the process seen (PID reuse); this process and its ancestors never are signalled."""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional

import psutil

from debug_stuck.contract import REPORT_PREFIX
from debug_stuck.errors import BadInput, NotInspectable
from debug_stuck.recovery.jobtree import job_tree_pids, protected_pids
from debug_stuck.recovery.reading import bounded_read


@dataclass
class StopResult:
    stopped: List[int]
    left: List[dict]  # {"pid", "state", "why"}, e.g. D-state survivors
    signals: List[str]  # the signals that were sent, in order (SIGINT, SIGTERM, SIGKILL)
    report_paths: List[str]
    root: Optional[int] = None
    steps: List[str] = field(default_factory=list)  # what was done, one line each
    errors: List[str] = field(default_factory=list)
    first_signal_at: Optional[float] = None  # time.time() of the first signal (after the report)

    def summary(self) -> str:
        lines = []
        if self.report_paths:
            lines.append(f"report: {', '.join(self.report_paths)}")
        sent = f" ({', '.join(self.signals)})" if self.signals else " (they had already exited)"
        lines.append(f"stopped {len(self.stopped)} process(es) of job {self.root}{sent}")
        lines += [f"left: pid {d['pid']} state {d['state']}: {d['why']}" for d in self.left]
        lines += [f"note: {e}" for e in self.errors]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "root": self.root,
            "stopped": list(self.stopped),
            "left": list(self.left),
            "signals": list(self.signals),
            "report_paths": list(self.report_paths),
            "steps": list(self.steps),
            "errors": list(self.errors),
        }


@dataclass
class _Tracked:
    proc: psutil.Process
    create_time: float


def _same_process(tracked: _Tracked) -> bool:
    """The PID still belongs to the process we saw (not a new one that got the PID after it exited)."""
    try:
        return psutil.Process(tracked.proc.pid).create_time() == tracked.create_time
    except psutil.Error:
        return False


def _alive(tracked: _Tracked) -> bool:
    if not _same_process(tracked):
        return False
    try:
        return tracked.proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def signal_if_same(tracked: _Tracked, sig: int, protected: Optional[set] = None) -> Optional[str]:
    """Send sig only if the PID is still the process we tracked. None when sent, else why not."""
    if tracked.proc.pid in (protected if protected is not None else protected_pids()):
        return "protected"
    if not _same_process(tracked):
        return "gone"
    try:
        tracked.proc.send_signal(sig)  # psutil re-checks the PID's identity as well
        return None
    except psutil.NoSuchProcess:
        return "gone"
    except psutil.AccessDenied:
        return "permission denied"


class _Tree:
    """The job's processes by PID and creation time, re-read from psutil before each signal."""

    def __init__(self, pids: Iterable[int], protected: set):
        self.protected = protected
        self.members: Dict[int, _Tracked] = {}
        for pid in pids:
            self._add_pid(pid)
        self.refresh()

    def _add_pid(self, pid: int) -> None:
        try:
            proc = psutil.Process(pid)
            self._add(proc)
        except psutil.Error:
            pass

    def _add(self, proc: psutil.Process) -> None:
        if proc.pid in self.protected:
            return
        try:
            created = proc.create_time()
        except psutil.Error:
            return
        old = self.members.get(proc.pid)
        if old is None or old.create_time != created:
            self.members[proc.pid] = _Tracked(proc, created)

    def refresh(self) -> None:
        """Add every live descendant of every live member (ranks in their own sessions included)."""
        for tracked in list(self.members.values()):
            if not _alive(tracked):
                continue
            children = bounded_read(lambda t=tracked: t.proc.children(recursive=True), "listing children", []) or []
            for child in children:
                self._add(child)

    def alive(self) -> List[_Tracked]:
        return [t for t in self.members.values() if _alive(t)]

    def depth_order(self, members: List[_Tracked]) -> List[_Tracked]:
        """Parents before children: freezing top-down leaves nothing that can fork behind our back."""
        pids = {t.proc.pid for t in members}

        def depth(t: _Tracked) -> int:
            d, proc = 0, t.proc
            for _ in range(32):
                ppid = bounded_read(proc.ppid, "parent", None)
                if ppid not in pids:
                    break
                d += 1
                proc = self.members[ppid].proc
            return d

        return sorted(members, key=depth)


def _wait_gone(tree: _Tree, seconds: float) -> List[_Tracked]:
    deadline = time.monotonic() + seconds
    last_refresh = time.monotonic()
    while True:
        alive = tree.alive()
        if not alive or time.monotonic() >= deadline:
            return alive
        if time.monotonic() - last_refresh > 0.5:
            tree.refresh()  # a launcher may start new processes while it shuts down
            last_refresh = time.monotonic()
        time.sleep(0.05)


def _describe_left(tracked: _Tracked, reason: Optional[str] = None) -> dict:
    pid = tracked.proc.pid

    def read(path: str) -> str:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(4096)

    status = bounded_read(lambda: read(f"/proc/{pid}/status"), f"reading /proc/{pid}/status", "") or ""
    m = re.search(r"^State:\s+(\w)", status, re.M)
    state = m.group(1) if m else "?"
    wchan = (bounded_read(lambda: read(f"/proc/{pid}/wchan"), f"reading /proc/{pid}/wchan", "") or "").strip()
    wchan = None if wchan in ("", "0") else wchan
    if reason == "permission denied":
        why = "permission denied: it belongs to another user (run debug-stuck stop as that user or root)"
    elif state == "D":
        why = (
            f"uninterruptible sleep in {wchan or 'a kernel call'}: SIGKILL is pending and takes effect when that call "
            "returns (a hung NFS/FUSE mount or GPU driver call keeps it there; dmesg says which)"
        )
    else:
        why = f"still alive after SIGKILL (state {state}); it may still be exiting (a large GPU context takes a while)"
    return {"pid": pid, "state": state, "wchan": wchan, "why": why}


SIGNAL_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGKILL: "SIGKILL"}


def stop_job(
    pid: int,
    report_dir: Optional[str] = None,
    grace: float = 10.0,
    write_report: bool = True,
    progress: Optional[Callable[[str], None]] = None,
    report=None,
) -> StopResult:
    """Write the diagnosis report, then end the job's whole process tree: SIGINT, SIGTERM, SIGKILL.

    Only the job's processes are signalled, each by PID after checking it is still the process
    seen (PID reuse); this process and its ancestors never are. Survivors (D state) are reported.
    ``report``: a Report already made for this job (a front end's), written instead of a new one.
    """
    say = progress or (lambda msg: None)
    root, pids = job_tree_pids(pid)
    protected = protected_pids()
    tree = _Tree(pids, protected)
    if not tree.members:
        raise NotInspectable(f"process {pid} exited before it could be stopped", "nothing left to stop")
    result = StopResult(stopped=[], left=[], signals=[], report_paths=[], root=root)
    if write_report:
        say("writing the report (evidence before teardown)")
        result.report_paths = write_stop_report(root, report_dir, result.errors, progress, report=report)
        result.steps.append(f"report written: {', '.join(result.report_paths)}")
    everyone = set(tree.members)
    alive: List[_Tracked] = tree.alive()
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, grace)):
        tree.refresh()
        alive = tree.alive()
        everyone |= set(tree.members)
        if not alive:
            break
        _continue_stopped(alive, protected, result)
        sent = _send(alive, sig, protected, result)
        if result.first_signal_at is None and sent:
            result.first_signal_at = time.time()
        say(f"{SIGNAL_NAMES[sig]} to {len(sent)} process(es); waiting up to {wait:g} s")
        alive = _wait_gone(tree, wait)
    refused: Dict[int, str] = {}
    if alive:
        tree.refresh()
        frozen = _freeze(tree, protected)
        everyone |= set(tree.members)
        alive = tree.alive()
        sent = _send(alive, signal.SIGKILL, protected, result, refused)
        if result.first_signal_at is None and sent:
            result.first_signal_at = time.time()
        say(f"SIGKILL to {len(sent)} process(es)")
        if frozen:
            result.steps.append(f"froze {len(frozen)} process(es) with SIGSTOP first, so none could fork")
        alive = _wait_gone(tree, max(5.0, min(grace, 15.0)))
    everyone |= set(tree.members)
    left_pids = {t.proc.pid for t in alive}
    result.left = [_describe_left(t, refused.get(t.proc.pid)) for t in alive]
    result.stopped = sorted(p for p in everyone if p not in left_pids)
    result.steps.append(
        f"stopped {len(result.stopped)} process(es)" + (f"; {len(result.left)} left" if result.left else "")
    )
    return result


def _send(
    members: List[_Tracked], sig: int, protected: set, result: StopResult, refused: Optional[Dict[int, str]] = None
) -> List[int]:
    sent = []
    for tracked in members:
        why = signal_if_same(tracked, sig, protected)
        if why is None:
            sent.append(tracked.proc.pid)
        elif why == "permission denied":
            result.errors.append(f"{SIGNAL_NAMES[sig]} to {tracked.proc.pid}: permission denied")
            if refused is not None:
                refused[tracked.proc.pid] = why
    if sent:
        if SIGNAL_NAMES[sig] not in result.signals:
            result.signals.append(SIGNAL_NAMES[sig])
        result.steps.append(f"{SIGNAL_NAMES[sig]} to {len(sent)} process(es): {' '.join(map(str, sent))}")
    return sent


def _continue_stopped(members: List[_Tracked], protected: set, result: StopResult) -> List[int]:
    """SIGCONT to the members stopped by SIGSTOP or Ctrl-Z: a stopped process cannot act on SIGINT or
    SIGTERM (they stay pending), so without it a clean shutdown is impossible and SIGKILL ends it."""
    stopped = []
    for tracked in members:
        try:
            status = tracked.proc.status()
        except psutil.Error:
            continue
        if status == psutil.STATUS_STOPPED and signal_if_same(tracked, signal.SIGCONT, protected) is None:
            stopped.append(tracked.proc.pid)
    if stopped:
        result.steps.append(
            f"SIGCONT to {len(stopped)} stopped process(es) first, so they can shut down cleanly: "
            + " ".join(map(str, stopped))
        )
    return stopped


def _freeze(tree: _Tree, protected: set) -> List[int]:
    frozen: set = set()
    for _ in range(20):
        tree.refresh()
        new = [t for t in tree.depth_order(tree.alive()) if t.proc.pid not in frozen]
        if not new:
            break
        for tracked in new:
            if signal_if_same(tracked, signal.SIGSTOP, protected) is None:
                frozen.add(tracked.proc.pid)
            else:
                frozen.add(tracked.proc.pid)  # gone or not ours: do not retry it
    return sorted(frozen)


def write_stop_report(
    pid: int,
    report_dir: Optional[str],
    errors: Optional[List[str]] = None,
    progress: Optional[Callable[[str], None]] = None,
    report=None,
) -> List[str]:
    """Diagnose the job and write the report (Markdown and JSON) into report_dir; returns the paths."""
    from debug_stuck.errors import DebugStuckError
    from debug_stuck.pipeline import DiagnoseRequest, diagnose, report_without_diagnosis
    from debug_stuck.render.files import write_report_files

    directory = os.path.abspath(report_dir or os.getcwd())
    failure = None
    try:
        if report is None:
            report = diagnose(DiagnoseRequest(pids=[pid], window=1.0, progress=progress, resume_pid=pid))
    except DebugStuckError as exc:
        failure = f"could not diagnose before stopping: {exc.one_line()}"
    except Exception as exc:  # the report must not cost the user the stop they asked for
        failure = f"could not diagnose before stopping: {type(exc).__name__}: {exc}"
    if failure is not None:
        report = report_without_diagnosis(pid, failure)  # the process table and the way back, at least
        if errors is not None:
            errors.append(failure)
    report.notes.append(f"written by `debug-stuck stop` before stopping the job (pid {pid})")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(report.created))
    base = os.path.join(directory, f"{REPORT_PREFIX}{pid}-{stamp}")
    try:
        # fsynced: the evidence is on disk before anything is signalled
        return list(write_report_files(report, base))
    except OSError as exc:
        raise BadInput(
            f"cannot write the report {base}.md: {exc.strerror or exc}", "give a writable --report-dir"
        ) from None


def job_listing(root: int) -> List[tuple]:
    """(pid, role, command line with secrets replaced) of every process of the job, for the question
    that asks before stopping them."""
    from debug_stuck.probes.collectors.procs import job_processes
    from debug_stuck.redact import redacted_command_line

    try:
        procs = job_processes([root])
    except Exception:  # the question is still asked, with the count only
        return []
    return [(p.pid, p.role, redacted_command_line(p.cmdline)) for p in procs]
