"""The watchdog: run (or attach to) a training job, notice within seconds when it stops moving, act.

Progress is the step counter in the job's log (debug_stuck.core.logtext.parse_progress on every new line).
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
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Callable, Dict, List, Optional

from debug_stuck.actions.watch.clock import (
    Stall,
    StallClock,
)
from debug_stuck.actions.watch.follow import LogFollower, unique_logs
from debug_stuck.actions.watch.job import Job, attach, launch
from debug_stuck.actions.watch.judge import Judge
from debug_stuck.actions.watch.motion import MotionTracker
from debug_stuck.actions.watch.responder import Responder
from debug_stuck.actions.watch.sampler import Sampler
from debug_stuck.actions.watch.settings import (
    TICK,
    Interrupted,
    WatchSettings,
)
from debug_stuck.actions.watch.tree import ProcessTree, TreeSample
from debug_stuck.errors import EXIT_USAGE, BadInput
from debug_stuck.redact import redact_argv, redact_obj


class Watcher(Sampler, Judge, Responder):
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
            from debug_stuck.kb import load_knowledge

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

    def _loop(self) -> int:
        previous = {}
        for signum in (signal.SIGTERM, signal.SIGHUP):
            try:
                previous[signum] = signal.signal(signum, self._on_signal)
            except (ValueError, OSError):  # not the main thread: leave signals to the caller
                pass
        try:
            return self._watch()
        except (KeyboardInterrupt, Interrupted) as exc:
            signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
            return self._interrupted(signum)
        finally:
            for signum, handler in previous.items():
                try:
                    signal.signal(signum, handler)
                except (ValueError, OSError):
                    pass

    def _on_signal(self, signum, frame) -> None:
        raise Interrupted(signum)

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
