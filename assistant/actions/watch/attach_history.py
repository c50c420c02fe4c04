"""Attaching to a job that may have hung already: the log's own history (its last step, how long it
has been silent, its step rhythm) seeds the stall clock, so a job silent for minutes is judged at
once. A mixin of Watcher: it reads the watcher's followers, job and clock."""

from __future__ import annotations

import time
from typing import Optional

import psutil


class AttachHistory:
    def _seed_from_existing_logs(self, now: float) -> None:
        """Attached: the log's own history. The last step in it, how long it has been silent and, when
        it tells, the job's step rhythm: then a job that hung minutes ago is judged at once (rule
        `steps`) instead of after the start-up allowance."""
        from debug_stuck.probes.collectors.logtail import read_log_tail

        newest = None
        stepped = None  # (mtime, tail) of the newest log with a step counter
        for follower in self.followers:
            tail = read_log_tail(follower.path, read_path=follower.read_path)
            if tail.error:
                continue
            if tail.mtime is not None:
                newest = tail.mtime if newest is None else max(newest, tail.mtime)
            if tail.progress.last_step is not None and (stepped is None or (tail.mtime or 0) >= stepped[0]):
                stepped = (tail.mtime or 0.0, tail)
        wall = time.time()
        if stepped is None:
            if newest is not None:
                age = max(0.0, wall - newest)
                self.clock.last_progress = self.clock.last_activity = now - age
            return
        mtime, tail = stepped
        progress = tail.progress
        started = self._job_started_at()
        last_step_at = mtime
        stamped = progress.last_step_epoch
        if stamped is not None and (started is None or stamped >= started - 1.0) and stamped <= mtime + 1.0:
            last_step_at = stamped  # a timestamped step line: when that step really was
        interval = self._rhythm_from_log(progress, mtime, started)
        self.clock.seed_history(progress.last_step, interval, wall - last_step_at, now)
        if newest is not None:  # other lines (or logs) written since the last step are activity
            self.clock.activity(now - max(0.0, wall - newest))

    def _job_started_at(self) -> Optional[float]:
        try:
            return psutil.Process(self.job.pid).create_time()
        except psutil.Error:
            return None

    @staticmethod
    def _rhythm_from_log(progress, mtime: float, started: Optional[float]) -> Optional[float]:
        """Seconds per step from the log's history: its timestamps or tqdm rates when it has them, else
        the time from the job's start to the last write over the steps written (start-up included, so
        the estimate errs long: a slow job is not called hung). None when it cannot tell (< 3 steps)."""
        rates = [r for r in (progress.seconds_per_step, progress.recent_seconds_per_step) if r]
        if rates:
            return max(rates)
        steps = progress.steps_seen
        if progress.last_step is not None and progress.last_step > 0:
            steps = min(steps, progress.last_step)  # a log appended to by earlier runs counts this run's only
        if started is None or steps < 3 or mtime <= started:
            return None
        return (mtime - started) / steps
