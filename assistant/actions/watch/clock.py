"""The stall clock: when no progress for this long counts as a stall. Pure logic over observations,
no processes (unit-tested on its own).

The threshold adapts to the job: ``max(floor, multiple x median interval, 2 x longest recent
interval)`` between step observations, so a slow job is not a hung one. A recognised long phase
(checkpoint save, validation) gets ``phase_multiple`` times that while it shows activity; before
the first steps, anything moving counts, for ``startup`` seconds.

Past the threshold, the stacks have the last word (their verdict comes from
debug_stuck.actions.watch.motion): a job idle in a wait is stalled at once; one computing through
changing functions is in a busy phase, allowed ``phase_multiple`` times the threshold (so is one
that computes while its stacks cannot be read: a pass and a spin look alike then); one computing
on a single chain of functions is stalled unless the job has shown such busy silences before and
ended them with a step: those are learned for the whole run (not only the last 20 intervals), and a
silence up to ``BUSY_MARGIN`` times the longest of them is expected.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Optional

DEFAULT_FLOOR = 10.0
DEFAULT_MULTIPLE = 8.0
DEFAULT_PHASE_MULTIPLE = 30.0
DEFAULT_STARTUP = 300.0
INTERVAL_HISTORY = 50
RECENT_INTERVALS = 20  # "the longest recent interval" looks this far back
STACK_MIN_EVERY = 2.0
BUSY_MARGIN = 2.0  # a busy silence is expected up to this many times the longest one learned
BUSY_HISTORY = 10
VERDICTS = ("moving", "busy", "stuck", "blind")  # blind: computes, its stacks unreadable


@dataclass
class Stall:
    seconds: float  # since the last step (or, before any step, since the last activity)
    threshold: float
    rule: str  # "steps" | "phase-idle" | "phase-limit" | "startup"
    phase: Optional[str] = None  # the recognised phase, or "busy" (a busy phase past its limit)


@dataclass
class StallClock:
    floor: float = DEFAULT_FLOOR
    multiple: float = DEFAULT_MULTIPLE
    phase_multiple: float = DEFAULT_PHASE_MULTIPLE
    startup: float = DEFAULT_STARTUP
    started_at: float = field(default_factory=time.monotonic)
    intervals: deque = field(default_factory=lambda: deque(maxlen=INTERVAL_HISTORY))
    seeded: bool = False  # intervals carried over from an earlier run of the same job
    known_rhythm: bool = False  # attached: the rhythm and the last step read from the log's own history
    last_step: Optional[int] = None
    max_step: Optional[int] = None
    step_changes: int = 0
    last_step_at: Optional[float] = None
    last_progress: float = 0.0
    last_activity: float = 0.0
    phase: Optional[str] = None  # a long phase seen on the stack since the last step
    phase_detail: Optional[str] = None
    verdict: Optional[str] = None  # the stacks' word on the silence since the last step (VERDICTS)
    verdict_at: Optional[float] = None
    # Busy silences that ended with a step (seconds): learned for the whole run, not a window of steps.
    busy_phases: deque = field(default_factory=lambda: deque(maxlen=BUSY_HISTORY))

    def __post_init__(self) -> None:
        self.last_progress = self.last_activity = self.started_at

    @classmethod
    def carried_over(cls, old: StallClock, now: float) -> StallClock:
        """A clock for a restarted run: same settings, the step rhythm already known."""
        clock = cls(old.floor, old.multiple, old.phase_multiple, old.startup, started_at=now)
        clock.intervals.extend(old.intervals)
        clock.seeded = bool(old.intervals)
        clock.busy_phases.extend(old.busy_phases)
        return clock

    def seed_history(self, last_step: int, interval: Optional[float], silent_for: float, now: float) -> None:
        """Attached to a running job: the step its log stopped at, how long the log has been silent,
        and (when the log's history tells it) its step rhythm. With a rhythm the clock judges at once,
        as if it had watched those steps itself, instead of waiting out the start-up allowance."""
        self.last_step = self.max_step = last_step
        self.last_progress = self.last_activity = now - max(0.0, silent_for)
        if interval is not None and interval > 0:
            self.intervals.extend([interval] * 3)
            self.known_rhythm = True

    # -- observations ----------------------------------------------------------------------------

    def step(self, value: int, now: float) -> bool:
        """A step counter seen in new log lines; True when it changed (progress)."""
        if value == self.last_step:
            return False
        if self.verdict in ("moving", "busy", "blind") and self.stepping:
            self.busy_phases.append(max(0.0, now - self.last_progress))  # a busy silence that ended in progress
        if self.last_step_at is not None:
            self.intervals.append(max(0.0, now - self.last_step_at))
        self.last_step, self.last_step_at = value, now
        self.max_step = value if self.max_step is None else max(self.max_step, value)
        self.step_changes += 1
        self.last_progress = self.last_activity = now
        self.phase = self.phase_detail = None
        self.verdict = self.verdict_at = None
        return True

    def activity(self, now: float) -> None:
        self.last_activity = max(self.last_activity, now)

    def motion(self, verdict: str, now: float) -> None:
        """What the stacks say about the silence since the last step: `moving` (computing, its
        functions changing), `busy` (computing on one chain of functions, or stacks unreadable), or
        `stuck` (idle in a wait, or frozen in one)."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict {verdict!r}: one of {', '.join(VERDICTS)}")
        self.verdict, self.verdict_at = verdict, now

    def in_phase(self, phase: str, detail: str) -> bool:
        """A long phase seen on the stack; True the first time since the last step."""
        first = self.phase is None
        self.phase, self.phase_detail = phase, detail
        return first

    # -- judgement -------------------------------------------------------------------------------

    @property
    def stepping(self) -> bool:
        """Steps flow: enough of them seen (in this run) to know the job's rhythm."""
        if self.known_rhythm:
            return True
        if self.seeded:
            return self.step_changes >= 1
        return len(self.intervals) >= 2

    def interval(self) -> Optional[float]:
        return statistics.median(self.intervals) if self.intervals else None

    def threshold(self) -> float:
        """Seconds without a new step that count as a stall (outside a recognised phase)."""
        if not self.stepping:
            return self.startup
        recent = list(self.intervals)[-RECENT_INTERVALS:]
        return max(self.floor, self.multiple * statistics.median(self.intervals), 2.0 * max(recent))

    def phase_allowance(self) -> float:
        return self.phase_multiple * self.threshold()

    def expected_busy(self) -> Optional[float]:
        """How long a busy silence may last, from the ones this job ended with a step before."""
        return BUSY_MARGIN * max(self.busy_phases) if self.busy_phases else None

    def _fresh_verdict(self, now: float, base: float) -> Optional[str]:
        # A verdict older than this says nothing about now (the watcher samples at least this often).
        if self.verdict_at is None or now - self.verdict_at > max(base, 2 * STACK_MIN_EVERY):
            return None
        return self.verdict

    def busy_limit(self, now: float) -> Optional[float]:
        """The silence allowed now because the stacks say the job computes, or None: a busy phase
        (moving) gets the phase allowance, a busy silence on one chain what was learned."""
        base = self.threshold()
        verdict = self._fresh_verdict(now, base)
        expected = self.expected_busy()
        if verdict in ("moving", "blind"):  # a pass through changing functions, or one we cannot see
            return max(self.phase_allowance(), expected or 0.0)
        if verdict == "busy" and expected is not None:
            return max(base, expected)
        return None

    def since_progress(self, now: float) -> float:
        return max(0.0, now - self.last_progress)

    def check(self, now: float) -> Optional[Stall]:
        base = self.threshold()
        if not self.stepping:
            # Start-up (or a job whose log shows no step counter): anything moving is progress.
            quiet = now - max(self.last_progress, self.last_activity)
            return Stall(quiet, base, "startup") if quiet > base else None
        since = self.since_progress(now)
        if self.phase is None:
            if since <= base:
                return None
            limit = self.busy_limit(now)
            if limit is None:
                return Stall(since, base, "steps")
            if since <= limit:
                return None
            if self.verdict in ("moving", "blind"):
                return Stall(since, limit, "phase-limit", "busy")
            return Stall(since, limit, "steps")
        allowance = self.phase_allowance()
        if since > allowance:
            return Stall(since, allowance, "phase-limit", self.phase)
        if now - self.last_activity > base:
            return Stall(since, base, "phase-idle", self.phase)
        return None

    def wants_stacks(self, now: float, last_sample: Optional[float]) -> bool:
        """Sample stacks only when nothing else moved for a while: half-way to a stall."""
        base = self.threshold()
        quiet = self.since_progress(now) if self.stepping else now - max(self.last_progress, self.last_activity)
        if quiet < base / 2:
            return False
        every = max(STACK_MIN_EVERY, base / 4)
        return last_sample is None or last_sample < self.last_progress or now - last_sample >= every
