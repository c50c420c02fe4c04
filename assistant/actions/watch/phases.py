"""What a stalled stack says at a glance: the cause its frames point at (the report says more),
and the frames in one line for the `stall` event."""

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


def describe_stack(thread, depth: int = 3) -> str:
    frames = [f for f in thread.frames if not f.native][:depth] or thread.frames[:depth]
    return " <- ".join(f.text() for f in frames) or "(no frames)"
