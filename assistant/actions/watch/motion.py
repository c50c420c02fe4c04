"""What the stacks say about a silent job, for the stall clock: stuck, busy or moving.

The main thread of each of the job's Python processes is followed across the stack samples of the
current silence (since the last step), with each process's CPU use:

- `stuck`: the process does not compute (idle in a wait), or its stack is frozen, line for line,
  in a wait (a collective, a lock, a sleep) while other threads spin;
- `busy`: it computes on one chain of functions (only the lines change: a loop, or one long
  function);
- `moving`: it computes and its chain of functions changes: a pass through several functions;
- `blind`: it computes and its stack cannot be read (no py-spy, no ptrace rights): a busy pass
  and a spinning loop look alike, so the clock gives it a busy phase's allowance, as `moving`.

Chains are compared as debug_stuck.live.progress does (functions and files, not lines), so watch
and the report judge motion alike. One chain is `looping` only after ``LOOP_SAMPLES`` samples
spanning at least half the threshold: two samples that land in the same function by chance are not
evidence. The job's verdict is the most hopeful of its processes' (a rank computing while the
launcher and the other ranks wait is the job computing); ``None`` while it cannot tell yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional

IDLE_CPU_PERCENT = 10.0  # a process using less than this (% of one core) does not compute
LOOP_SAMPLES = 4
LOOP_SPAN_SHARE = 0.5  # ... spanning this share of the threshold
MAX_SAMPLES = 12  # per process and silence
# The innermost Python frame of a thread that waits (for a collective, a lock, a child, I/O, time).
WAIT_FRAME = re.compile(
    r"(^|_)(wait|waiter|barrier|synchronize|sleep|acquire|join|select|poll|recv|recv_into|accept|result|get"
    r"|all_reduce|allreduce|all_gather|broadcast|reduce_scatter|monitored_barrier)($|_)",
    re.I,
)


@dataclass
class _Sample:
    at: float
    chain: tuple  # (function, file) of each Python frame, innermost first
    lines: tuple
    innermost: str
    idle: bool  # py-spy's word: the thread was not running


class MotionTracker:
    def __init__(self) -> None:
        self.samples: Dict[int, List[_Sample]] = {}
        self.since: Optional[float] = None  # the silence the samples belong to (the clock's last progress)

    def begin(self, since: float) -> None:
        """The samples to come belong to the silence that began at `since` (a new one forgets the last)."""
        if since != self.since:
            self.samples, self.since = {}, since

    def add(self, pid: int, thread, at: float) -> None:
        """A main thread's stack, sampled at `at`."""
        frames = [f for f in thread.frames if not f.native]
        sample = _Sample(
            at=at,
            chain=thread.signature(lines=False),
            lines=thread.signature(lines=True),
            innermost=frames[0].bare_name if frames else "",
            idle=thread.state == "idle",
        )
        kept = self.samples.setdefault(pid, [])
        kept.append(sample)
        del kept[:-MAX_SAMPLES]

    def verdict(self, cpu: Mapping[int, Optional[float]], threshold: float, final: bool = False) -> Optional[str]:
        """moving | busy | stuck for the job's processes `cpu` names (with their CPU use, None when not
        known yet), or None while the samples cannot tell (then `final` gives `busy`: something
        computes, and no more samples will come)."""
        verdicts = [_process_verdict(self.samples.get(pid, []), used, threshold) for pid, used in cpu.items()]
        if "moving" in verdicts:
            return "moving"
        if "blind" in verdicts:
            return "blind"
        if None in verdicts:
            return "busy" if final else None
        if "busy" in verdicts:
            return "busy"
        return "stuck"


def _process_verdict(samples: List[_Sample], cpu: Optional[float], threshold: float) -> Optional[str]:
    if cpu is not None and cpu < IDLE_CPU_PERCENT:
        return "stuck"
    if not samples:
        return "blind" if cpu is not None else "stuck"  # computing, stack unreadable / nothing known
    last = samples[-1]
    if cpu is None and last.idle:
        return "stuck"  # its CPU use not known yet: py-spy saw the thread off the CPU
    run = []
    for sample in reversed(samples):
        if sample.chain != last.chain:
            break
        run.append(sample)
    if len(run) >= LOOP_SAMPLES and last.at - run[-1].at >= LOOP_SPAN_SHARE * threshold:
        frozen = len({s.lines for s in run}) == 1
        return "stuck" if frozen and WAIT_FRAME.search(last.innermost) else "busy"
    if len(run) < len(samples):
        return "moving"  # its functions changed in this silence, and not for one chain since
    return None
