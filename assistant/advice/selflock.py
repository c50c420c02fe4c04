"""The values of the fixes for a thread that waits for a lock an outer frame of its own stack holds:
its own call back into locked code (a Lock is not re-entrant), a signal handler run inside the code
that holds it, or the parent's frame that forked it inside the lock's block (live.selflock). Read
from the job's source (never run)."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

from debug_stuck.live.selflock import lock_held_by_outer, signal_handler_between


def self_lock_values(
    values: Dict[str, str],
    end: dict,
    own: List[dict],
    frame_text: Callable[[dict], str],
    source_line: Callable[[dict, object], Optional[str]],
    through_manager: bool = False,
) -> None:
    """`own`: the end thread's frames of the job's own code, innermost first. Sets `self_lock`,
    `self_lock_name`, `self_outer`, `self_inner` (and `signal_handler` when the frame that asks is a
    handler's); for a fork-held end, `fork_lock`, `fork_site` and `start_call` instead."""
    pid = end.get("pid")
    found = lock_held_by_outer(pid, [(f.get("path") or f.get("file"), f.get("line")) for f in own], through_manager)
    if found is None:
        return
    wanted, index, inner = found
    if (end.get("waits_on") or {}).get("end") == "fork-held":
        # the parent forked it inside the lock's block: the fix moves the start out
        values["fork_lock"], values["fork_site"] = wanted, frame_text(own[index])
        call = (source_line(own[index], pid) or "").split("#", 1)[0].strip()
        values["start_call"] = call if call.endswith(")") else "process.start()"
        return
    values["self_lock"] = f"`{wanted}`"
    values["self_outer"] = frame_text(own[index])
    values["self_inner"] = frame_text(own[inner])
    values["self_lock_name"] = wanted
    sites = [
        (f.get("path") or f.get("file"), f.get("line"), str(f.get("function") or "").rsplit(".", 1)[-1]) for f in own
    ]
    handler = signal_handler_between(pid, sites, index)
    if handler is not None:
        values["signal_handler"] = handler
