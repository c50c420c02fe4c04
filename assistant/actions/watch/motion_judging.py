"""What a watcher does with the stacks' verdict on a silence (debug_stuck.recovery.watch.motion):
hands it to the clock, samples a few more times while it cannot tell, and announces a busy phase.
A mixin of Watcher: it reads the watcher's clock, tree sample and stacks."""

from __future__ import annotations

import time
from typing import List

from debug_stuck.recovery.watch.phases import describe_stack

# Before calling a computing job stalled, its stack is sampled this many times more at most, this far
# apart, until it is seen to change (a busy phase) or to stay on one chain of functions (a loop).
SETTLE_SAMPLES = 6
SETTLE_GAP = 0.3


class MotionJudging:
    def _judge_motion(self, pids: List[int], final: bool) -> None:
        """The stacks' verdict on this silence, for the clock (debug_stuck.recovery.watch.motion)."""
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
