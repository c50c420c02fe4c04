"""How often a thread was put on a CPU, how often it blocked, and how long it ran, over seconds.

/proc/PID/task/TID/schedstat holds three counters (Documentation/scheduler/sched-stats.rst): the
nanoseconds the thread ran, the nanoseconds it waited on a run queue, and the number of times it was
run on a CPU. A thread blocked in one wait that never ends adds to none of them; each time its wait
returns (data came, a sleep ran out) the count grows, and the time it then ran is the work it did
before it waited again. /proc/PID/task/TID/status adds `voluntary_ctxt_switches` (proc(5)): the
times it blocked, which a busy thread's preemptions do not add to. Both are the scheduler's own
counters, read without stopping the thread or taking the memory lock a stuck task could hold (as
`cmdline` and `environ` do).

Stack samplers must not run while this watches: a blocking `py-spy dump` stops and resumes every
thread, two runs each.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from debug_stuck.bounded import CallTimedOut, call_with_timeout

READ_SECONDS = 1.0  # one reading of every watched thread
STEP_SECONDS = 0.25

Thread = Tuple[int, int]  # (pid, tid)


@dataclass
class Wakes:
    """What one thread did over `seconds`: `runs` times put on a CPU, `blocked` times it went back to
    wait, `ran_ms` on a CPU; `wake_ms`: the CPU each wake-up seen whole took, from the end of one wait
    to the start of the next (a reading that saw several ends shares its time among them)."""

    seconds: float
    runs: int
    ran_ms: float
    blocked: int = 0
    wake_ms: List[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"seconds": round(self.seconds, 2), "runs": self.runs, "blocked": self.blocked,
                "ran_ms": round(self.ran_ms, 1), "wake_ms": [round(ms, 2) for ms in self.wake_ms[:32]]}  # fmt: skip


Clock = Tuple[int, int, int]  # nanoseconds run, times run, times blocked


def read_clock(pid: int, tid: int) -> Optional[Clock]:
    """The counters of one thread, or None when they cannot be read (gone, no file)."""
    base = f"/proc/{pid}/task/{tid}"
    try:
        with open(f"{base}/schedstat", encoding="ascii") as fh:
            fields = fh.read(256).split()
        with open(f"{base}/status", encoding="utf-8", errors="replace") as fh:
            status = fh.read(8192)
        blocked = status.split("\nvoluntary_ctxt_switches:", 1)[1].split()[0]
        return int(fields[0]), int(fields[2]), int(blocked)
    except (OSError, ValueError, IndexError):
        return None


def _read_all(threads: Iterable[Thread]) -> Dict[Thread, Clock]:
    out = {}
    for thread in threads:
        clock = read_clock(*thread)
        if clock is not None:
            out[thread] = clock
    return out


CLOCKS = {0: time.time, 1: time.monotonic}  # CLOCK_REALTIME, CLOCK_MONOTONIC (clock_gettime(2))
TIMER_ABSTIME = 1


def sleep_left(pid: int, syscall: str, args) -> Optional[float]:
    """Seconds before a thread's clock_nanosleep ends, or None when that cannot be read. An absolute
    sleep (TIMER_ABSTIME, as CPython's time.sleep makes it since 3.11) keeps its deadline in a timespec
    of the sleeper's memory (clock_nanosleep(2): clockid, flags, request): two 64-bit words read from
    /proc/PID/mem (the rights py-spy needs too), bounded in time. A relative sleep's start is not kept."""
    if syscall != "clock_nanosleep" or len(args) < 3 or args[0] not in CLOCKS or not args[1] & TIMER_ABSTIME:
        return None

    def read() -> bytes:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(args[2])
            return mem.read(16)

    try:
        data = call_with_timeout(read, READ_SECONDS, f"reading the sleep of {pid}")
        seconds, nanoseconds = struct.unpack("=qq", data)  # this machine's byte order: the job runs here
    except (CallTimedOut, OSError, ValueError, struct.error):
        return None
    if not 0 <= nanoseconds < 1_000_000_000:
        return None
    return seconds + nanoseconds / 1e9 - CLOCKS[args[0]]()


def _wake_costs(readings: List[Clock]) -> List[float]:
    """The CPU of each wake-up that ended between the readings: ran time since the previous block."""
    costs: List[float] = []
    pending = 0.0
    for before, after in zip(readings, readings[1:]):
        pending += (after[0] - before[0]) / 1e6
        ended = after[2] - before[2]
        if ended > 0:
            costs.extend([pending / ended] * ended)
            pending = 0.0
    return costs


def _seen(readings: List[Clock], elapsed: float) -> Wakes:
    first, last = readings[0], readings[-1]
    return Wakes(elapsed, last[1] - first[1], (last[0] - first[0]) / 1e6, last[2] - first[2], _wake_costs(readings))


def watch_wakeups(
    threads: Iterable[Thread],
    seconds: float,
    enough: Optional[Callable[[Dict[Thread, Wakes]], bool]] = None,
) -> Tuple[Dict[Thread, Wakes], Optional[str]]:
    """({thread: Wakes since the start}, error or None): the threads' counters read every STEP_SECONDS
    for at most `seconds`, or until `enough(wakes so far)` says the question is settled. A reading that
    does not come back within READ_SECONDS ends the watch with what was seen."""
    threads = list(dict.fromkeys(threads))
    if not threads:
        return {}, None
    try:
        first = call_with_timeout(lambda: _read_all(threads), READ_SECONDS, "reading the threads' scheduler counters")
    except CallTimedOut as exc:
        return {}, str(exc)
    started = time.monotonic()
    readings: Dict[Thread, List[Clock]] = {thread: [clock] for thread, clock in first.items()}
    wakes: Dict[Thread, Wakes] = {}
    while True:
        time.sleep(min(STEP_SECONDS, max(0.0, seconds - (time.monotonic() - started))))
        try:
            now = call_with_timeout(lambda: _read_all(first), READ_SECONDS, "reading the threads' scheduler counters")
        except CallTimedOut as exc:
            return wakes, str(exc)
        elapsed = time.monotonic() - started
        for thread, clock in now.items():
            readings[thread].append(clock)
        wakes = {thread: _seen(seen, elapsed) for thread, seen in readings.items() if thread in now}
        if elapsed >= seconds or (enough is not None and enough(wakes)):
            return wakes, None
