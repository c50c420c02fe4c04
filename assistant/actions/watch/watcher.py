"""The watchdog: run (or attach to) a training job, notice within seconds when it stops moving, act.

Progress is the step counter in the job's log (debug_stuck.probes.collectors.logtail.parse_progress on every new line).
Everything else the watcher can see cheaply is *activity*: the log growing without a new step, the
process tree using CPU or doing I/O, the main thread's Python stack changing between two samples,
the job's GPUs being busy. Activity alone never proves a training job is healthy (a spinning NCCL
wait is busy too), so once steps flow only the step counter resets the stall clock; activity
matters before the first steps (start-up: imports, compile, data) and during a recognised long
phase (checkpoint save, validation), which gets its own, larger allowance as long as it shows
signs of life.

The threshold adapts to the job: ``max(floor, multiple x median interval, 2 x longest recent
interval)`` between step observations, so a slow job is not a hung one. Stacks are sampled (py-spy,
Python frames only) only when no step was seen for half the threshold, so watching costs almost
nothing while the job steps.

On a stall the watcher writes the diagnosis report (Markdown + JSON), records the incident in the
journal, and then reports only, stops the job, or stops and restarts it from its last good
checkpoint (debug_stuck.recovery.plan), refusing to loop when the restarted job stalls again without
getting past the step of the previous incident.

Everything the watcher does is told through events (plain dicts, see ``EVENTS``), so the CLI can
print them as text or as one JSON object per line.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

import psutil

from debug_stuck.bounded import call_with_timeout
from debug_stuck.errors import EXIT_USAGE, BadInput
from debug_stuck.live.observe import main_thread
from debug_stuck.live.phases import phase_of
from debug_stuck.recovery.watch.attach_history import AttachHistory
from debug_stuck.recovery.watch.clock import (
    DEFAULT_FLOOR,
    DEFAULT_MULTIPLE,
    DEFAULT_PHASE_MULTIPLE,
    DEFAULT_STARTUP,
    STACK_MIN_EVERY,
    Stall,
    StallClock,
)
from debug_stuck.recovery.watch.follow import LogFollower, unique_logs
from debug_stuck.recovery.watch.job import Job, attach, launch
from debug_stuck.recovery.watch.journaling import Journaling
from debug_stuck.recovery.watch.motion import MotionTracker
from debug_stuck.recovery.watch.motion_judging import MotionJudging
from debug_stuck.recovery.watch.phases import quick_cause
from debug_stuck.recovery.watch.stall_view import StallView
from debug_stuck.recovery.watch.tree import ProcessTree, TreeSample
from debug_stuck.redact import redact_argv, redact_obj

EVENTS = (
    "started",
    "progress",
    "phase",
    "stall",
    "report",
    "action",
    "restarted",
    "resumed",
    "gave-up",
    "exited",
    "warning",
)
ON_HANG = ("report", "stop", "restart")

DEFAULT_POLL = 1.0
DEFAULT_MAX_RESTARTS = 3
DEFAULT_GRACE = 10.0
DEFAULT_PROGRESS_EVERY = 60.0
DEFAULT_REPORT_DIR = "debug-stuck-reports"

# Exit status when the job stalled and watch ended it (--on-hang stop, or restart gave up);
# `timeout` uses the same number for "the command ran out of time".
EXIT_STALLED = 124

TICK = 0.25  # the log is followed (and echoed) this often; everything else once per poll
GPU_EVERY_SECONDS = 5.0
STACK_TIMEOUT = 3.0
HOOK_LOOK_EVERY = 2.0  # seconds between looks for a process's debug_stuck.hook marker, until found
CPU_ACTIVE_PERCENT = 10.0  # the tree's CPU use (% of one core) above which it counts as doing something
IO_ACTIVE_BYTES_PER_SECOND = 64 * 1024
GPU_ACTIVE_UTIL = 5.0
DIAGNOSIS_SECONDS = 90.0
RESUME_PLAN_SECONDS = 30.0
JOURNAL_LOOKBACK_SECONDS = 7 * 86400  # earlier stalls of the same command this recent tell same-step from random


@dataclass
class WatchSettings:
    on_hang: str = "report"
    max_restarts: int = DEFAULT_MAX_RESTARTS
    report_dir: Path = Path(DEFAULT_REPORT_DIR)
    poll: float = DEFAULT_POLL
    floor: float = DEFAULT_FLOOR
    multiple: float = DEFAULT_MULTIPLE
    phase_multiple: float = DEFAULT_PHASE_MULTIPLE
    startup: float = DEFAULT_STARTUP
    progress_every: float = DEFAULT_PROGRESS_EVERY
    grace: float = DEFAULT_GRACE
    native: bool = True
    logs: List[str] = field(default_factory=list)  # extra logs to follow
    echo: Optional[Callable[[bytes], None]] = None  # where the job's output is teed (None: quiet)
    journal: bool = True
    gpu: bool = True

    def validate(self) -> None:
        if self.on_hang not in ON_HANG:
            raise BadInput(f"--on-hang {self.on_hang!r} is not valid", f"valid: {', '.join(ON_HANG)}")
        checks = (
            ("--poll", self.poll, 0.1, 60.0),
            ("--floor", self.floor, 1.0, 86400.0),
            ("--multiple", self.multiple, 1.0, 1000.0),
            ("--phase-multiple", self.phase_multiple, 1.0, 1000.0),
            ("--startup", self.startup, 1.0, 86400.0),
            ("--grace", self.grace, 0.0, 3600.0),
        )
        for flag, value, low, high in checks:
            if not low <= value <= high:
                raise BadInput(f"{flag} {value:g} is out of range", f"give a number from {low:g} to {high:g}")
        if self.max_restarts < 0:
            raise BadInput(f"--max-restarts {self.max_restarts} is negative", "give 0 or more")
        if self.progress_every < 0:
            raise BadInput(f"--progress-every {self.progress_every:g} is negative", "give seconds, or 0 for none")


class _Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Watcher(AttachHistory, StallView, Journaling, MotionJudging):
    def __init__(self, settings: WatchSettings, emit: Callable[[dict], None]):
        settings.validate()
        # Absolute from here on: the job's log, the reports and the journal's paths must open from
        # anywhere, and a log must be one path (the diagnosis also finds it as the job's stdout).
        settings.report_dir = Path(os.path.abspath(os.path.expanduser(str(settings.report_dir))))
        self.settings = settings
        self._emit = emit
        self.watch_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.host = socket.gethostname()
        self.job: Optional[Job] = None
        self.original_command: Optional[List[str]] = None  # the job's identity in the journal, across restarts
        self.knowledge = None
        self.restarts = 0
        self.previous_incident_step: Optional[int] = None
        self.incident_steps: List[Optional[int]] = []  # the last step of each stall so far
        self.incidents = 0
        self.clock = StallClock(settings.floor, settings.multiple, settings.phase_multiple, settings.startup)
        self.followers: List[LogFollower] = []
        self.tree: Optional[ProcessTree] = None
        self.dumps: Dict[int, object] = {}
        self.stack_sampled_at: Optional[float] = None
        self.last_sample: Optional[TreeSample] = None
        self.gpu_available: Optional[bool] = None if settings.gpu else False
        self.gpu_checked_at: Optional[float] = None
        self.last_gpu: Optional[dict] = None
        self.stalled: Optional[Stall] = None  # the stall reported and not yet over (--on-hang report)
        self.stalled_incident: Optional[int] = None  # its journal id
        self.progress_emitted_at: Optional[float] = None
        self.incident_ids: List[int] = []  # journal ids of this watch's incidents (their end is recorded)
        self.expect_resume_after: Optional[int] = None  # a restart meant to resume after this checkpoint step
        # debug_stuck.hook heartbeats: pid -> (marker or None, when it was looked for, last beat seen)
        self.heartbeats: Dict[int, list] = {}
        self.steps_from_log = False  # the log gives step numbers: heartbeats are activity, not steps
        self.motion = MotionTracker()
        self.motion_undecided = False  # the last stack sample could not tell stuck from busy yet
        self.busy_told: Optional[float] = None  # the silence (its start) whose busy phase was announced
        self.refused: Optional[str] = None  # why a stop or restart was not done (no report written)

    # -- events -----------------------------------------------------------------------------------

    def emit(self, event: str, **data) -> None:
        record = {"event": event, "time": round(time.time(), 3), "watch_id": self.watch_id}
        record.update(data)
        self._emit(redact_obj(record))

    # -- entry points -----------------------------------------------------------------------------

    def watch_command(self, command: List[str], cwd: Optional[str] = None) -> int:
        if not command:
            raise BadInput("no command to watch", "give it after --, e.g. debug-stuck watch -- python train.py")
        cwd = cwd or os.getcwd()
        self._start(Job(pid=0, command=list(command), cwd=cwd))
        return self._loop()

    def watch_pid(self, pid: int) -> int:
        job = attach(pid)
        self._start(job)
        return self._loop()

    # -- start, follow, judge ---------------------------------------------------------------------

    def _log_path(self, run: int) -> Path:
        return self.settings.report_dir / f"watch-{self.watch_id}-run{run}.log"

    def _start(self, job: Job, restarted_from: Optional[int] = None) -> None:
        if self.knowledge is None:  # before anything is launched: a broken knowledge base stops us here
            from debug_stuck.core.kb import load_knowledge

            self.knowledge = load_knowledge()
        if job.pid == 0 or restarted_from is not None:
            job.log = str(self._log_path(job.run))
            try:
                job.proc = launch(job.command, job.cwd, Path(job.log), job.env)
            except OSError as exc:
                raise BadInput(
                    f"cannot write the job's log {job.log}: {exc.strerror or exc}", "give a writable --report-dir"
                ) from None
            job.pid = job.proc.pid
            job.logs = [job.log]
        self.job = job
        if self.original_command is None:
            self.original_command = list(job.command)
        logs = self._logs()
        own = unique_logs([job.log])[0] if job.log else None
        self.followers = [
            # The log we own is read from its start; any other only from now on (its past is not this run).
            LogFollower(path, self.settings.echo if path == own else None, path != own, job.read_paths.get(path))
            for path in logs
        ]
        self.tree = ProcessTree(job.pid)
        self.dumps, self.stack_sampled_at, self.stalled, self.last_sample = {}, None, None, None
        self.motion = MotionTracker()
        now = time.monotonic()
        self.progress_emitted_at = now
        if restarted_from is not None:
            self.clock = StallClock.carried_over(self.clock, now)
        if not job.launched:
            self._seed_from_existing_logs(now)
        if restarted_from is None:
            self.emit(
                "started",
                pid=job.pid,
                command=redact_argv(job.command),
                cwd=job.cwd,
                log=job.log,
                logs=logs,
                attached=not job.launched,
                host=self.host,
                on_hang=self.settings.on_hang,
                threshold=self.clock.threshold(),
                floor=self.settings.floor,
            )

    def _logs(self) -> List[str]:
        """The job's logs and the --log ones, each once, by real path (and inode)."""
        opened = self.job.read_paths if self.job else {}
        return unique_logs(list(self.job.logs if self.job else []) + list(self.settings.logs), opened)

    def _follow_logs(self, now: float, final: bool = False) -> bool:
        stepped = False
        for follower in self.followers:
            lines, grew = follower.read(final=final)
            if grew:
                self.clock.activity(now)
            if lines:
                from debug_stuck.probes.collectors.logtail import parse_progress

                progress = parse_progress(lines)
                first = self.clock.step_changes == 0
                if progress.last_step is not None and self.clock.step(progress.last_step, now):
                    stepped = self.steps_from_log = True
                    if first:
                        self._check_resumed(lines)
        return stepped

    def _check_resumed(self, lines: List[str]) -> None:
        """A restart meant to resume after checkpoint step S: the new run's first step says whether it did."""
        expected, self.expect_resume_after = self.expect_resume_after, None
        if expected is None:
            return
        from debug_stuck.probes.collectors.logtail import parse_progress

        first = next(
            (p.last_step for p in map(parse_progress, ([line] for line in lines)) if p.last_step is not None), None
        )
        if first is not None and first < expected:
            self.emit(
                "warning",
                message=f"the restarted run (pid {self.job.pid}) began at step {first}, not after the checkpoint's "
                f"step {expected}: it did not resume from the checkpoint, so everything before is being redone",
            )

    def _sample_tree(self, now: float) -> Optional[TreeSample]:
        sample = self.tree.sample(now) if self.tree is not None else None
        if sample is None or not sample.alive:
            return sample
        self.last_sample = sample
        if sample.cpu_percent is not None and sample.cpu_percent >= CPU_ACTIVE_PERCENT:
            self.clock.activity(now)
        if sample.io_bytes_per_second is not None and sample.io_bytes_per_second >= IO_ACTIVE_BYTES_PER_SECOND:
            self.clock.activity(now)
        return sample

    def _sample_gpu(self, now: float) -> None:
        if self.gpu_available is False:
            return
        if self.gpu_checked_at is not None and now - self.gpu_checked_at < GPU_EVERY_SECONDS:
            return
        self.gpu_checked_at = now
        from debug_stuck.probes.collectors.gpu.collect import collect_gpus

        snap = collect_gpus(timeout=3.0, samples=1)
        if not snap.available or not snap.devices:
            self.gpu_available = False
            return
        self.gpu_available = True
        pids = set(self.tree.remembered()) if self.tree is not None else set()
        used = {p.gpu_index for p in snap.processes if p.pid in pids}
        devices = [d for d in snap.devices if not used or d.index in used]
        utils = [d.util for d in devices if d.util is not None]
        power = [d.power_ratio() for d in devices if d.power_ratio() is not None]
        self.last_gpu = {
            "util": max(utils) if utils else None,
            "power_ratio": round(max(power), 3) if power else None,
            "devices": [d.index for d in devices],
        }
        if utils and max(utils) >= GPU_ACTIVE_UTIL:
            self.clock.activity(now)

    def _follow_heartbeats(self, now: float) -> None:
        """A job with debug_stuck.hook reports its step itself: a new step is progress, as a new
        step in the log is (it needs no ptrace and no log). Its counter is used as the step only
        while the log gives none (two counters would look like steps forever); otherwise a beat is
        activity. Markers are looked for every HOOK_LOOK_EVERY seconds per process until found."""
        from debug_stuck.probes.collectors.hook_dump import find_marker, read_heartbeat

        pids = self.tree.python_pids() if self.tree is not None else []
        for pid in pids:
            entry = self.heartbeats.setdefault(pid, [None, None, None])
            marker, looked, last = entry
            if marker is None:
                if looked is not None and now - looked < HOOK_LOOK_EVERY:
                    continue
                entry[0], _ = find_marker(pid)
                entry[1] = now
                marker = entry[0]
                if marker is None:
                    continue
            beat = read_heartbeat(marker)
            if beat is None or beat == last:
                continue
            entry[2] = beat
            at, step = beat
            when = now - max(0.0, time.time() - at)  # the beat's own time, on the monotonic clock
            if step is not None and not self.steps_from_log:
                self.clock.step(step, when)
            elif last is not None:
                self.clock.activity(when)

    def _sample_stacks(self, now: float, final: bool = False) -> None:
        from debug_stuck.probes.collectors.stacks import sample_stacks

        pids = self.tree.python_pids() if self.tree is not None else []
        if not pids:
            self.stack_sampled_at = now
            return
        series = sample_stacks(pids, samples=1, native=False, timeout=STACK_TIMEOUT)
        self.stack_sampled_at = time.monotonic()
        self.motion.begin(self.clock.last_progress)
        moved = False
        fresh = {}
        for pid, entry in series.items():
            dump = entry.latest()
            if dump is None:
                continue
            fresh[pid] = dump
            before = main_thread(self.dumps.get(pid), pid)
            after = main_thread(dump, pid)
            if before is not None and after is not None and before.signature(lines=True) != after.signature(lines=True):
                moved = True
            if after is not None:
                self.motion.add(pid, after, self.stack_sampled_at)
        if moved:
            self.clock.activity(self.stack_sampled_at)
        self.dumps = fresh
        self._judge_motion(pids, final)
        for pid, dump in fresh.items():
            thread = main_thread(dump, pid)
            if thread is None:
                continue
            found = phase_of(thread.frames, self.knowledge)
            if found is not None:
                phase, frame = found
                if self.clock.in_phase(phase, frame):
                    self.emit(
                        "phase",
                        phase=phase,
                        frame=frame,
                        pid=pid,
                        seconds=round(self.clock.since_progress(now), 1),
                        allowance=round(self.clock.phase_allowance(), 1),
                    )
                break

    def _maybe_progress_event(self, now: float) -> None:
        every = self.settings.progress_every
        if not every:
            return
        if self.progress_emitted_at is not None and now - self.progress_emitted_at < every:
            return
        self.progress_emitted_at = now
        interval = self.clock.interval()
        sample = self.last_sample
        self.emit(
            "progress",
            pid=self.job.pid,
            step=self.clock.last_step,
            seconds_since_step=round(self.clock.since_progress(now), 1) if self.clock.last_step is not None else None,
            interval=round(interval, 3) if interval is not None else None,
            threshold=round(self.clock.threshold(), 1),
            stepping=self.clock.stepping,
            cpu_percent=sample.cpu_percent if sample else None,
            processes=sample.processes if sample else None,
        )

    def _loop(self) -> int:
        previous = {}
        for signum in (signal.SIGTERM, signal.SIGHUP):
            try:
                previous[signum] = signal.signal(signum, self._on_signal)
            except (ValueError, OSError):  # not the main thread: leave signals to the caller
                pass
        try:
            return self._watch()
        except (KeyboardInterrupt, _Interrupted) as exc:
            signum = exc.signum if isinstance(exc, _Interrupted) else signal.SIGINT
            return self._interrupted(signum)
        finally:
            for signum, handler in previous.items():
                try:
                    signal.signal(signum, handler)
                except (ValueError, OSError):
                    pass

    def _on_signal(self, signum, frame) -> None:
        raise _Interrupted(signum)

    def _watch(self) -> int:
        next_poll = time.monotonic()
        while True:
            now = time.monotonic()
            self._follow_logs(now)
            if self.job.gone():
                return self._exited()
            if now >= next_poll:
                next_poll = now + self.settings.poll
                sample = self._sample_tree(now)
                if sample is not None and not sample.alive:
                    return self._exited()
                self._sample_gpu(now)
                self._follow_heartbeats(now)
                if self.clock.wants_stacks(now, self.stack_sampled_at):
                    self._sample_stacks(now)
                code = self._judge(time.monotonic())
                if code is not None:
                    return code
                self._maybe_progress_event(now)
            time.sleep(max(0.0, min(TICK, next_poll - time.monotonic())))

    def _judge(self, now: float) -> Optional[int]:
        stall = self.clock.check(now)
        if self.stalled is not None:
            if stall is None:  # it moved again after a reported stall
                self.emit("resumed", pid=self.job.pid, step=self.clock.last_step)
                self._journal_update(
                    self.stalled_incident, outcome=f"moved again by itself (step {self.clock.last_step})"
                )
                self.stalled = self.stalled_incident = None
            return None
        if stall is None:
            self._announce_busy(now)
            return None
        # Before calling it a stall, look at the stacks once more: a long phase gets its allowance,
        # a job computing through changing functions is busy, not stalled.
        # The tree is listed again first: every process (a launcher's ranks too) is in that sample.
        if self.tree is not None:
            self.tree.refresh(now)
        missing = set(self.tree.python_pids() if self.tree is not None else []) - set(self.dumps)
        if missing or self.stack_sampled_at is None or now - self.stack_sampled_at > STACK_MIN_EVERY:
            self._sample_stacks(now)
        if stall.rule == "steps":
            self._settle_motion()
        now = time.monotonic()
        stall = self.clock.check(now)
        if stall is None:
            self._announce_busy(now)
            return None
        return self._on_stall(stall, now)

    # -- a stall ----------------------------------------------------------------------------------

    def _on_stall(self, stall: Stall, now: float) -> Optional[int]:
        self.incidents += 1
        job = self.job
        last_step = self.clock.last_step
        cause_hint = quick_cause(self.knowledge, self.dumps)
        self.emit(
            "stall",
            pid=job.pid,
            seconds=round(stall.seconds, 1),
            threshold=round(stall.threshold, 1),
            rule=stall.rule,
            phase=stall.phase,
            last_step=last_step,
            interval=round(self.clock.interval(), 3) if self.clock.interval() is not None else None,
            cause=cause_hint,
            evidence=self._stall_evidence(),
        )
        report = self._write_report(stall, last_step)
        self.incident_steps.append(last_step)
        incident_id = self._journal_record(stall, last_step, report, cause_hint)
        if job.gone():  # it ended while we were looking at it: nothing to act on
            self._journal_update(incident_id, outcome="the job ended by itself")
            return self._exited()
        if self._follow_logs(time.monotonic()):  # it moved while we were writing the report
            self.emit("resumed", pid=job.pid, step=self.clock.last_step, note="progress resumed during the report")
            self._journal_update(incident_id, outcome="resumed")
            return None
        if self.settings.on_hang == "report":
            self.stalled, self.stalled_incident = stall, incident_id
            self._journal_update(incident_id, action="report")
            return None
        if not report.get("paths"):
            return self._refuse_action(stall, incident_id, report)
        if self.settings.on_hang == "stop":
            self._stop(reason="--on-hang stop")
            self._journal_update(incident_id, action="stop", outcome="stopped")
            return EXIT_STALLED
        return self._restart(stall, last_step, incident_id)

    def _refuse_action(self, stall: Stall, incident_id: Optional[int], report: dict) -> None:
        """No report on disk, no stop (`debug-stuck stop` refuses too): the evidence would go with the
        job. Said in a `warning` event (and one stderr line); the watch goes on, reporting only."""
        action = self.settings.on_hang
        why = report.get("error") or "no report was written"
        self.refused = (
            f"did not {action} pid {self.job.pid}: its incident report could not be written ({why}); "
            "watching on, reporting only; give a writable --report-dir"
        )
        self.emit("warning", message=self.refused, refused=action, pid=self.job.pid)
        self.stalled, self.stalled_incident = stall, incident_id
        self._journal_update(incident_id, action="report", outcome=f"no {action}: no report could be written")
        return None

    def _stall_note(self, stall: Stall, last_step: Optional[int]) -> str:
        what = f"step {last_step}" if last_step is not None else "any progress"
        return (
            f"debug-stuck watch: no {'new step' if last_step is not None else 'progress'} for "
            f"{stall.seconds:.0f} s (threshold {stall.threshold:.0f} s, rule {stall.rule}); last seen: {what}"
        )

    def _diagnose(self, stall: Stall, last_step: Optional[int]):
        from debug_stuck.core.request import DiagnoseRequest
        from debug_stuck.live.diagnose import run_diagnosis

        request = DiagnoseRequest(
            answers=self._answers(last_step),
            pids=[self.job.pid],
            logs=self._logs(),
            native=self.settings.native,
        )
        report = run_diagnosis(request, self.knowledge)
        report.notes.insert(0, self._stall_note(stall, last_step))
        if report.resume is None:
            plan = self._resume_plan()
            if plan is not None:
                report.resume = plan.to_dict()
        from debug_stuck.recovery.advice import personalize

        try:
            personalize(report, self.knowledge)
        except Exception as exc:  # the incident report stands with the playbooks' generic commands
            report.errors.append(f"advice: could not fill the fixes for this job: {type(exc).__name__}: {exc}")
        return report

    def _answers(self, last_step: Optional[int]) -> dict:
        """Triage answers the watcher knows: mid-run (steps were seen), and whether this job stalled at
        this same step before (this session, or earlier ones in the journal): pattern D, deterministic."""
        from debug_stuck.core.answers import Answer

        answers = {}
        if last_step is None:
            return answers
        answers["phase"] = Answer("phase", "mid-run", "evidence")
        earlier = list(self.incident_steps)
        if self.settings.journal:
            from debug_stuck.recovery.journal import Journal, JournalError

            command = shlex.join(redact_argv(self.original_command or self.job.command))
            try:
                since = time.time() - JOURNAL_LOOKBACK_SECONDS
                earlier += [
                    i.last_step for i in Journal().incidents(limit=200) if i.command == command and i.time >= since
                ]
            except JournalError:
                pass
        earlier = [s for s in earlier if s is not None]
        if earlier:
            answers["step"] = Answer("step", "same-step" if last_step in earlier else "random", "evidence")
        return answers

    def _write_report(self, stall: Stall, last_step: Optional[int]) -> dict:
        job = self.job
        out: dict = {"pid": job.pid}
        try:
            report = call_with_timeout(lambda: self._diagnose(stall, last_step), DIAGNOSIS_SECONDS, "the diagnosis")
        except Exception as exc:  # the job may have exited, or a collector failed: say so in a report of its own
            from debug_stuck.core.report import Report

            message = exc.one_line() if hasattr(exc, "one_line") else f"{type(exc).__name__}: {exc}"
            out["error"] = f"could not diagnose: {message}"
            report = Report(errors=[out["error"]], notes=[self._stall_note(stall, last_step)])
        from debug_stuck.render.files import write_report_files

        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = self.settings.report_dir / f"incident-{stamp}-pid{job.pid}"
        try:
            self.settings.report_dir.mkdir(parents=True, exist_ok=True)
            markdown, data = write_report_files(report, str(base))
            out["paths"] = {"markdown": markdown, "json": data}
        except OSError as exc:
            failed = f"could not write the report into {self.settings.report_dir}: {exc.strerror or exc}"
            out["error"] = f"{out['error']}; {failed}" if out.get("error") else failed
        verdict = report.verdict
        out.update(
            cause=verdict.cause,
            confidence=verdict.confidence,
            pattern=report.pattern,
            phase=verdict.phase,
            hung=verdict.hung,
            summary=verdict.summary,
        )
        self.emit("report", **out)
        return out

    # -- stop and restart -------------------------------------------------------------------------

    def _resume_plan(self):
        from debug_stuck.recovery.plan import plan_resume

        job = self.job
        try:
            return call_with_timeout(
                lambda: plan_resume(job.command, job.cwd, env=job.env), RESUME_PLAN_SECONDS, "resume plan"
            )
        except Exception as exc:  # no plan is a fallback, not a failure of the watch
            message = exc.one_line() if hasattr(exc, "one_line") else f"{type(exc).__name__}: {exc}"
            self.emit("warning", message=f"could not plan the resume: {message}")
            return None

    def _stop(self, reason: str, action: str = "stop") -> dict:
        """End the job's whole tree (debug_stuck.recovery.stop.stop_job; for a job we launched, its own
        session as the fallback), then tell what happened in an `action` event. Returns that event's data."""
        from debug_stuck.recovery.stop import stop_job

        job = self.job
        started = time.monotonic()
        result: dict = {"action": action, "pid": job.pid, "reason": reason, "via": "stop_job"}
        box: dict = {}

        def run():
            try:
                box["result"] = stop_job(
                    job.pid, report_dir=str(self.settings.report_dir), grace=self.settings.grace, write_report=False
                )
            except Exception as exc:  # reported below; the fallback still ends our own session
                box["error"] = exc

        worker = threading.Thread(target=run, name="watch:stop", daemon=True)
        worker.start()
        deadline = time.monotonic() + 3 * self.settings.grace + 30.0
        while worker.is_alive() and time.monotonic() < deadline:
            if job.proc is not None:
                job.proc.poll()  # reap our child as soon as it dies, so the stopper sees it gone
            worker.join(0.1)
        stopped = box.get("result")
        if stopped is not None:
            result.update(stopped=list(stopped.stopped), signals=list(stopped.signals), left=list(stopped.left or []))
        else:
            error = box.get("error")
            message = error.one_line() if hasattr(error, "one_line") else str(error or "did not return in time")
            result["error"] = f"stop_job: {message}"
        if job.launched and (result.get("error") or result.get("left")):
            result["via"] = "stop_job+session"
            result["left"] = self._stop_own_session()
        if job.proc is not None:
            try:
                job.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        result["seconds"] = round(time.monotonic() - started, 1)
        self.emit("action", **result)
        return result

    def _stop_own_session(self) -> List[int]:
        """End the session we launched the job in: SIGINT, SIGTERM, then SIGKILL (every process in it is the job's)."""
        job = self.job
        pgid = job.proc.pid
        steps = ((signal.SIGINT, self.settings.grace / 2), (signal.SIGTERM, self.settings.grace / 2))
        for sig, wait in steps:
            try:
                os.killpg(pgid, signal.SIGCONT)  # a stopped (SIGSTOP, Ctrl-Z) process cannot shut down cleanly
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                return []
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if job.proc.poll() is not None and not _group_alive(pgid):
                    return []
                time.sleep(0.1)
        from debug_stuck.bounded import kill_process_group

        kill_process_group(pgid)
        try:
            job.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return [pgid]
        return []

    def _restart(self, stall: Stall, last_step: Optional[int], incident_id: Optional[int]) -> Optional[int]:
        job = self.job
        reason = None
        if self.restarts >= self.settings.max_restarts:
            reason = f"reached --max-restarts {self.settings.max_restarts}"
        elif self.restarts > 0:
            best = self.clock.max_step
            previous = self.previous_incident_step
            if previous is None and best is None:
                reason = "no progress since the last restart: the job shows no step counter that moved"
            elif previous is not None and (best is None or best <= previous):
                where = f"step {last_step}" if last_step is not None else "before its first step"
                reason = (
                    f"no progress since the last restart: it stalled again at {where} without getting past step "
                    f"{previous} (a deterministic hang: restarting will not help, read the report)"
                )
        if reason is not None:
            self._stop(reason="giving up on restarts")
            self.emit("gave-up", pid=job.pid, reason=reason, restarts=self.restarts, last_step=last_step)
            self._journal_update(incident_id, action="gave-up", outcome=reason)
            return EXIT_STALLED
        self.previous_incident_step = last_step
        stopped = self._stop(reason="--on-hang restart", action="restart")
        if stopped.get("left"):
            reason = f"processes still alive after the stop: {stopped['left']}; not starting a second copy"
            self.emit("gave-up", pid=job.pid, reason=reason, restarts=self.restarts, last_step=last_step)
            self._journal_update(incident_id, action="gave-up", outcome=reason)
            return EXIT_STALLED
        self._follow_logs(time.monotonic(), final=True)  # the old run's last words (a traceback from the stop)
        plan = self._resume_plan()
        command, env, resume, warning = list(job.command), job.env, {}, None
        if plan is None:
            resume["note"] = "no resume plan (it could not be made): restarting the original command"
        else:
            if plan.argv:
                command = [str(a) for a in plan.argv]
            if plan.env:
                env = dict(os.environ if env is None else env)
                env.update(plan.env)
            checkpoint = plan.checkpoint
            resume = {
                "checkpoint": checkpoint.path if checkpoint is not None else None,
                "checkpoint_step": checkpoint.step if checkpoint is not None else None,
                "framework": plan.framework,
                "lost": plan.lost,
                "notes": list(plan.notes),
            }
            unchanged = [str(a) for a in (plan.argv or job.command)] == list(job.command) and not plan.env
            if checkpoint is not None and unchanged:
                # Nothing tells the relaunch where to start: the same command starts over.
                where = f"{checkpoint.path}" + (f" (step {checkpoint.step})" if checkpoint.step is not None else "")
                resume.update(checkpoint=None, checkpoint_step=None)
                resume["lost"] = (
                    "everything: it restarts from step 0 (the command is unchanged: the script takes no resume "
                    f"option, so the newest checkpoint, {where}, is not passed to it)"
                )
                resume["notes"].append(f"not resumed: {where} is the newest valid checkpoint, unused by this relaunch")
                warning = (
                    f"the restart does not resume from {where}: the script declares no resume option, so the same "
                    "command starts over from step 0 and every step so far is redone; give the script a --resume "
                    "option that loads the checkpoint"
                )
            elif checkpoint is not None and checkpoint.step is not None:
                self.expect_resume_after = checkpoint.step
        self.restarts += 1
        new = Job(
            pid=0, command=command, cwd=(plan.cwd if plan is not None else None) or job.cwd, env=env, run=job.run + 1
        )
        try:
            self._start(new, restarted_from=job.pid)
        except BadInput as exc:
            self.emit("gave-up", pid=job.pid, reason=f"could not relaunch: {exc.one_line()}", restarts=self.restarts)
            self._journal_update(incident_id, action="gave-up", outcome="relaunch failed")
            return EXIT_STALLED
        start = " from step 0 (no resume option)" if warning else ""
        self._journal_update(incident_id, action="restart", outcome=f"restarted as pid {new.pid}{start}")
        if warning:
            self.emit("warning", message=warning)
        self.emit(
            "restarted",
            pid=new.pid,
            previous_pid=job.pid,
            attempt=self.restarts,
            max_restarts=self.settings.max_restarts,
            command=redact_argv(command),
            log=new.log,
            **resume,
        )
        return None

    # -- the end ----------------------------------------------------------------------------------

    def _exited(self) -> int:
        self._follow_logs(time.monotonic(), final=True)
        code = self.job.exit_code()
        self.emit(
            "exited",
            pid=self.job.pid,
            code=code,
            last_step=self.clock.last_step,
            restarts=self.restarts,
            forwarded=None,
        )
        if code == 0:
            how = "finished (exit code 0)"
        elif code is not None:
            how = f"ended by itself with exit code {code}"
        else:
            how = "ended by itself"
        self._journal_ended(code, how)
        if self.refused is not None:
            return EXIT_USAGE  # asked to stop or restart, it could not: the --report-dir is to blame
        if self.job.proc is None:
            return 0
        return code if code is not None else 0

    def _interrupted(self, signum: int) -> int:
        """Ctrl-C or SIGTERM to the watcher: pass it on to a job we launched (its own session does not
        get the terminal's signals), wait for it, then leave. An attached job is left alone."""
        job = self.job
        name = signal.Signals(signum).name
        if job is not None and job.launched and job.proc.poll() is None:
            self.emit(
                "action", action="stop", pid=job.pid, reason=f"watch got {name}: passing it on to the job", via="signal"
            )
            try:
                os.killpg(job.proc.pid, signal.SIGCONT)  # a stopped job could not act on it
                os.killpg(job.proc.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                job.proc.wait(timeout=self.settings.grace)
            except subprocess.TimeoutExpired:
                self._stop_own_session()
            code = job.exit_code()
            self.emit(
                "exited",
                pid=job.pid,
                code=code,
                last_step=self.clock.last_step,
                restarts=self.restarts,
                forwarded=name,
            )
            self._journal_ended(code, f"was stopped by the {name} watch passed on (exit code {code})")
        return 128 + signum


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Signal 0 also reaches zombies: only count members that still run.
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (OSError, psutil.Error):
            continue
    return False
