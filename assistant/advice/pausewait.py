"""The values of the fixes for a thread in signal.pause(): whether the job's own file arms the real-time
timer two ways. alarm(2): "alarm() and setitimer(2) share the same timer; calls to one will interfere
with use of the other": a timeout helper's signal.alarm(0) cancels the setitimer(ITIMER_REAL) tick a
paced loop pauses for. Read from the source, never run."""

from __future__ import annotations

import ast
from typing import Callable, Dict, Optional

from debug_stuck.live.selflock import named_calls, parse_source


def pause_values(values: Dict[str, str], end: dict, source: Callable[[dict], Optional[str]], file: str) -> None:
    """`alarm_clash` ("train.py:17") when the chain ends in a signal wait (pause, sigsuspend) and the
    file of its own frame calls both signal.setitimer(ITIMER_REAL, ...) and signal.alarm(...)."""
    if (end.get("waits_on") or {}).get("kind") != "signal":
        return
    tree = parse_source(source(end))
    if tree is None:
        return
    timers = [c for c in named_calls(tree, ("setitimer",)) if c.args and "ITIMER_REAL" in ast.unparse(c.args[0])]
    alarms = named_calls(tree, ("alarm",))
    if timers and alarms:
        values["alarm_clash"] = f"{file.rsplit('/', 1)[-1]}:{alarms[-1].lineno}"
