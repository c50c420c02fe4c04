"""Waits that end by themselves, watched past the sampling window.

Two stack samples a second apart cannot see a loop that sleeps two seconds between steps: both find
it asleep on one line. A job whose main thread sleeps (a throttled loop, a slow `__getitem__` on one
rank, a helper that paces its output) is therefore watched a few seconds longer, through the
scheduler's own counters of each main thread (probes.collectors.wakeups), with no stack sampler
attached. Two readings come out of it:

- a wait that has no timeout (a futex without a deadline, a pipe read, waitpid) only returns when
  what it waits for happens; a main thread found in one that ran again during the watch had its wait
  end and began the next one: a collective that completed, a pipe that delivered a line;
- a sleeping loop that does real work each time it wakes (milliseconds of CPU: a training step) is
  paced, not polling. A poll's check of a file or a flag costs about a millisecond or less (this
  machine, idle: `os.path.exists` 0.4 ms a wake-up, a small JSON status file 0.9 ms; with both CPUs
  busy, `os.path.exists` 0.7-1.5 ms, and 2.4 ms on its first wake after a stack sampler left it);
  a small MLP's step on one thread 7-17 ms. The cheapest of at least two whole wake-ups is weighed,
  so a first, cold one decides nothing.
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional

from debug_stuck.core.libfacts import match_frame
from debug_stuck.live.jobfacts import frames_table, in_library_retry_loop
from debug_stuck.live.loops import waits_in_own_code
from debug_stuck.probes.collectors.wakeups import Wakes, sleep_left, watch_wakeups

WATCH_MIN_SECONDS = 3.0  # a sleeper seen running twice before this still waits for the others to show
WATCH_MAX_SECONDS = 6.0
MAX_WATCHED = 64
POLL_WORK_MS = 3.0  # CPU per wake-up above which a sleeping loop works between its sleeps
WAKES_TO_WEIGH = 2
TRAINING_ROLES = ("rank",)  # whose main thread's progress is the job's


def _main_frames(snap, pid: int) -> list:
    thread = snap.latest_main_thread(pid)
    return list(thread.frames) if thread is not None else []


def main_wait(info) -> dict:
    return (info.waits or {}).get(info.pid) or {}


def sleeps(info) -> bool:
    return info.state == "S" and main_wait(info).get("op") == "sleep"


# Whose sleep may pace the job: a rank, or a process of its own it waits for (a child that streams its
# output, a producer process, a pool's or a DataLoader's worker on slow storage). A launcher sleeps
# between looks at its ranks (torchrun's agent every --monitor-interval).
PACING_ROLES = ("rank", "other", "worker-process", "dataloader-worker")


def paces(info) -> bool:
    return sleeps(info) and info.role in PACING_ROLES


def timeout_seconds(info) -> Optional[float]:
    """The timeout of its main thread's poll or epoll_wait, in seconds, when one was given."""
    wait = main_wait(info)
    timeout = wait.get("timeout_ms")
    return timeout / 1000.0 if wait.get("op") in ("poll", "epoll") and timeout and timeout > 0 else None


def _returned_early(info, found: Wakes) -> bool:
    """It woke more often than its wait's timeout alone would wake it: the wait ended on what it waits
    for (a DataLoader's trainer polls its workers' pipe with a 5 s timeout, torch's MP_STATUS_CHECK_INTERVAL)."""
    timeout = timeout_seconds(info)
    return timeout is not None and found.blocked > found.seconds / timeout + 1


def waits_without_timeout(info) -> bool:
    """Its main thread is in a wait that returns only when what it waits for happens: a futex with no
    deadline, a read of a pipe, a file or a terminal (a socket's reads are judged by their bytes: a
    peer's keep-alive wakes them too), a wait for a child."""
    wait = main_wait(info)
    op, kind = wait.get("op"), (wait.get("object") or {}).get("kind")
    if op == "futex":
        return wait.get("timeout_ms") == -1
    return (op == "read" and kind not in (None, "socket")) or op == "wait-child"


def _wakes(info) -> Optional[Wakes]:
    data = getattr(info, "main_wakes", None)
    if not data:
        return None
    return Wakes(data["seconds"], data["runs"], data["ran_ms"], data.get("blocked", 0), list(data.get("wake_ms") or []))


def wait_returned(info) -> Optional[str]:
    """Why a rank's main thread's wait ended and began again during the watch, or None."""
    found = _wakes(info)
    if info.role not in TRAINING_ROLES or found is None:
        return None
    if _returned_early(info, found):
        return (
            f"{info.label()} main thread is found in a {main_wait(info)['op']} with a {timeout_seconds(info):g} s "
            f"timeout in every sample, yet it ended {found.blocked} times in {found.seconds:.1f} s, more often "
            f"than its timeout allows: what it waits for keeps coming"
        )
    if found.runs < 1 or not waits_without_timeout(info):
        return None
    wait = main_wait(info)
    what = {"futex": "a wait with no timeout", "read": "a read", "wait-child": "a wait for its child"}[wait["op"]]
    return (
        f"{info.label()} main thread is found in {what} in every sample, yet ran {found.runs} time(s) in the "
        f"{found.seconds:.1f} s after: the wait ended and the next began (what it waits for keeps coming)"
    )


def _paced(found: Optional[Wakes]) -> bool:
    """At least WAKES_TO_WEIGH whole wake-ups seen, the cheapest of them POLL_WORK_MS or more."""
    return found is not None and len(found.wake_ms) >= WAKES_TO_WEIGH and min(found.wake_ms) >= POLL_WORK_MS


def works_between_sleeps(info) -> Optional[str]:
    """Why a rank's sleeping main thread is paced work, not a poll, or None."""
    found = _wakes(info)
    if info.role not in TRAINING_ROLES or not sleeps(info) or not _paced(found):
        return None
    return (
        f"{info.label()} main thread sleeps in every sample, yet woke {len(found.wake_ms)} times in "
        f"{found.seconds:.1f} s and ran {min(found.wake_ms):.0f} ms of CPU or more each time (a poll's check "
        f"costs about a millisecond): it works between its sleeps, a paced loop"
    )


def polls(info) -> Optional[str]:
    """What the watch saw of a rank's sleeping main thread that does little when it wakes, or None."""
    left = main_wait(info).get("sleep_left_s")
    if info.role in TRAINING_ROLES and sleeps(info) and left is not None and left > WATCH_MAX_SECONDS:
        return f"{info.label()} main thread has {left:.0f} s of its sleep left"
    found = _wakes(info)
    if info.role not in TRAINING_ROLES or found is None or not sleeps(info):
        return None
    if not found.wake_ms:
        return f"{info.label()} main thread did not wake and sleep again in {found.seconds:.0f} s of watching"
    costs = sorted(found.wake_ms)
    return (
        f"{info.label()} main thread woke {len(costs)} time(s) in {found.seconds:.1f} s and ran "
        f"{costs[len(costs) // 2]:.1f} ms of CPU a wake-up: it checks something and sleeps again"
    )


TIMED_POLLS = ("poll", "epoll", "select")
MAX_TIMED_THREADS = 4  # of one process, whose sleep's deadline is read


def timed_threads(snap, info, table) -> List[float]:
    """For a rank whose main thread waits with no timeout: the seconds within which each of its other
    threads that wakes by itself to run the job's code will wake (a thread asleep in the job's own code,
    a producer pacing itself; an event loop whose select times out at its next scheduled callback,
    frames.yaml `timer`: asyncio.sleep, call_later). What the main thread waits for may come from one."""
    if info.role not in TRAINING_ROLES or not waits_without_timeout(info):
        return []
    series = snap.stacks.get(info.pid)
    dump = series.latest() if series is not None else None
    found: List[float] = []
    for thread in dump.threads if dump is not None else []:
        wait = (info.waits or {}).get(thread.tid) or {}
        if thread.tid == info.pid or len(found) >= MAX_TIMED_THREADS:
            continue
        if wait.get("op") == "sleep" and waits_in_own_code(thread.frames):
            args = wait.get("args")
            left = sleep_left(info.pid, wait.get("syscall"), args) if args else None
            if left is not None:
                wait["sleep_left_s"] = round(left, 2)  # a sleep longer than the watch: assess._feeder_wakes_later
            found.append(WATCH_MAX_SECONDS if left is None else max(0.0, left))
        elif wait.get("op") in TIMED_POLLS and (wait.get("timeout_ms") or 0) > 0:
            timer = any((match_frame(table, f.function, f.file) or {}).get("timer") for f in thread.frames)
            if timer:
                found.append(wait["timeout_ms"] / 1000.0)
    return [seconds for seconds in found if seconds <= WATCH_MAX_SECONDS]


def _settled(procs, sleepers, until: Optional[float] = None) -> Callable[[Dict], bool]:
    """The watch may stop: a rank's wait returned or its sleeps hold work (progress either way), or
    every sleeper has woken twice (its rhythm is seen) and, when a rank waits with no timeout, at
    least WATCH_MIN_SECONDS went by (time for that wait to end). With no sleeper (a rank waits for
    threads that wake by themselves), `until` seconds are enough."""
    by_pid = {info.pid: info for info in procs}
    patient = any(
        info.role in TRAINING_ROLES and (waits_without_timeout(info) or timeout_seconds(info)) for info in procs
    )
    sleeping = {info.pid for info in sleepers}

    def enough(wakes: Dict) -> bool:
        for (pid, _), found in wakes.items():
            info = by_pid[pid]
            info.main_wakes = found.to_dict()
            if wait_returned(info) or works_between_sleeps(info):
                return True
        seen = [found for (pid, _), found in wakes.items() if pid in sleeping]
        if not seen:
            return until is not None and any(found.seconds >= until for found in wakes.values())
        if not all(len(found.wake_ms) >= WAKES_TO_WEIGH for found in seen):
            return False
        return not patient or seen[0].seconds >= WATCH_MIN_SECONDS

    return enough


def watch_sleepers(snap, say: Callable[[str], None]) -> Optional[str]:
    """When a process of the job sleeps in its main thread (not in a library's retry loop, whose
    wake-ups are its waiting), watch every main thread's runs for a few seconds more (`main_wakes` on
    each process). Returns an error line, or None."""
    for info in snap.processes:
        wait = main_wait(info)
        if wait.get("args") and info.state == "S":
            left = sleep_left(info.pid, wait.get("syscall"), wait["args"])
            if left is not None:
                wait["sleep_left_s"] = round(left, 2)
    # a process taken in for the pipe it holds (live.pipeholders) is no step loop of the job's
    alive = [info for info in snap.processes if info.state not in ("Z", "D") and info.adopted_by is None]
    alive = alive[:MAX_WATCHED]
    table = frames_table() or []
    sleepers = [
        info for info in alive if paces(info) and not in_library_retry_loop(_main_frames(snap, info.pid), table)
    ]
    fed = {info.pid: timed for info in alive for timed in [timed_threads(snap, info, table)] if timed}
    for info in snap.processes:
        for each in (info.waits or {}).values():
            each.pop("args", None)
    if all(main_wait(info).get("sleep_left_s", 0) > WATCH_MAX_SECONDS for info in sleepers):
        sleepers = []  # none of them wakes while watched (an hour's sleep): nothing to see
    if not sleepers and not fed:
        return None
    # a thread that wakes within `timed` seconds may hand the waiting main thread its item: one wake more
    latest = max((t for timed in fed.values() for t in timed), default=0.0)
    until = min(WATCH_MAX_SECONDS, max(WATCH_MIN_SECONDS, latest + 1.0)) if fed else None
    if sleepers:
        say(f"{sleepers[0].label()} sleeps between steps: watching up to {WATCH_MAX_SECONDS:.0f} s more how it wakes")
    else:
        waiter = next(info for info in alive if info.pid in fed).label()
        say(f"{waiter} waits for a thread that wakes by itself: watching for up to {until:.0f} s more")
    wakes, error = watch_wakeups(
        [(info.pid, info.pid) for info in alive], WATCH_MAX_SECONDS, _settled(alive, sleepers, until)
    )
    for info in alive:
        found = wakes.get((info.pid, info.pid))
        info.main_wakes = found.to_dict() if found is not None else None
    return f"watching the main threads' wake-ups: {error}" if error else None


RECENT_WORK_SECONDS = 120.0  # a log written this recently: the loop worked a few of its polls ago
LONG_SLEEP_S = 600  # one sleep with this much left is the wait itself, not a poll's pause
_OPEN_LOOP = re.compile(r"^(while\s+(True|1)|for\b)")


def waits_for_input(info, silent: Optional[float]) -> Optional[str]:
    """Why a rank asleep in its own main loop may be waiting for its next input, not stuck: the loop
    names no condition it waits for (`while True:`, a `for` loop: the job's work loop, which sleeps
    when no input is there yet), and the job's log was written `silent` seconds ago, within
    RECENT_WORK_SECONDS. A `while not os.path.exists(done):` loop waits for one thing: not this,
    unless the loop grows its own sleep (`wait["backoff"]`, live.loops.growing_sleep): a wait with
    backoff expects what it waits for to take a while."""
    loop = str(main_wait(info).get("loop") or "")
    delay = main_wait(info).get("backoff")
    if info.role in TRAINING_ROLES and sleeps(info) and loop and delay:
        return (
            f"{info.label()} sleeps in its own loop (`{loop}`), and the loop grows its sleep (`{delay}`) each time: "
            "a wait with backoff for something outside its code (a scheduler's flag, another job's output), which "
            "may come later; whether it will cannot be read from the job: whoever should provide it tells"
        )
    if info.role not in TRAINING_ROLES or not sleeps(info) or not _OPEN_LOOP.match(loop):
        return None
    if silent is None or silent > RECENT_WORK_SECONDS:
        return None
    left = main_wait(info).get("sleep_left_s")
    if left is not None and left >= LONG_SLEEP_S:
        return None  # no work loop pauses this long between looks: the sleep is what holds the job up
    wakes = f"; its time.sleep has {left:.0f} s left (its deadline, read from its memory)" if left else ""
    return (
        f"{info.label()} sleeps in its own loop (`{loop}`) that names nothing it waits for, and the job's log "
        f"was written {silent:.0f} s ago: a work loop waiting for its next input (a file, a shard, a job) and "
        "one waiting for input that never comes look alike until a few of its looks have passed; the log a few "
        f"minutes from now tells them apart{wakes}"
    )
