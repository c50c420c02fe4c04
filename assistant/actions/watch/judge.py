"""The watcher's judgement: is it a stall? The stall clock says when no progress has lasted too long;
the stacks are looked at once more before calling it one, and their verdict on the silence
(debug_stuck.actions.watch.motion: stuck, busy or moving) decides: it is handed to the clock, the
stacks are sampled a few more times while they cannot tell, and a busy phase is announced. A mixin
of Watcher: it reads the watcher's clock, tree sample and stacks."""

from __future__ import annotations

import time
from typing import List, Optional

from debug_stuck.actions.watch.clock import (
    STACK_MIN_EVERY,
)
from debug_stuck.actions.watch.phases import describe_stack

# Before calling a computing job stalled, its stack is sampled this many times more at most, this far
# apart, until it is seen to change (a busy phase) or to stay on one chain of functions (a loop).
SETTLE_SAMPLES = 6
SETTLE_GAP = 0.3


class Judge:
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

    def _judge_motion(self, pids: List[int], final: bool) -> None:
        """The stacks' verdict on this silence, for the clock (debug_stuck.actions.watch.motion)."""
        if not self.clock.stepping:
            return  # before the steps flow any activity counts: the start-up rule needs no verdict
        known = self.last_sample.cpu_by_pid if self.last_sample is not None else {}
        verdict = self.motion.verdict({pid: known.get(pid) for pid in pids}, self.clock.threshold(), final)
        self.motion_undecided = verdict is None
        if verdict is not None:
            self.clock.motion(verdict, self.stack_sampled_at)

    def _settle_motion(self) -> None:
        """A computing job is called stalled only once its stack was seen to stay on one chain of
        functions: while the samples cannot tell, a few more, unless a step comes first."""
        for attempt in range(SETTLE_SAMPLES):
            if not self.motion_undecided:
                return
            time.sleep(SETTLE_GAP)
            if self._follow_logs(time.monotonic()):
                return
            self._sample_stacks(time.monotonic(), final=attempt == SETTLE_SAMPLES - 1)

    def _announce_busy(self, now: float) -> None:
        """A `phase` event, once per silence, when the stacks keep a silent job from being called stalled."""
        clock = self.clock
        limit = clock.busy_limit(now)
        if limit is None or self.busy_told == clock.last_progress or clock.since_progress(now) <= clock.threshold():
            return
        self.busy_told = clock.last_progress
        found = self._stall_thread()
        learned = max(clock.busy_phases) if clock.busy_phases else None
        self.emit(
            "phase",
            phase="busy",
            frame=describe_stack(found[1]) if found else None,
            pid=found[0] if found else self.job.pid,
            seconds=round(clock.since_progress(now), 1),
            allowance=round(limit, 1),
            motion=clock.verdict,
            learned=round(learned, 1) if learned is not None else None,
        )
