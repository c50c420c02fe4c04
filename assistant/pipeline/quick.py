"""What a stack sample points at, at a glance: the cause whose stack signals it matches best, for
watch's `stall` event (the full diagnosis, when it comes, says more)."""

from __future__ import annotations

from typing import Dict, Optional


def quick_cause(knowledge, dumps: Dict[int, object]) -> Optional[str]:
    """The cause whose stack signals the last stack sample matches best (the report says more)."""
    if knowledge is None or not dumps:
        return None
    from debug_stuck.core.classify import Observations, ObservedLine, match_signals

    obs = Observations()
    for pid, dump in dumps.items():
        for thread in dump.threads:
            for frame in thread.frames:
                obs.add("stack", ObservedLine(frame.text(), pid=pid))
    score: Dict[str, float] = {}
    for match in match_signals(knowledge, obs, sources=("stack",)):
        score[match.signal.cause] = score.get(match.signal.cause, 0.0) + match.signal.weight
    if not score:
        return None
    best = max(score, key=score.get)
    return best if score[best] >= 0.3 else None
