"""Which long phase a main thread is in (checkpoint save, validation: skills/data/phases.yaml), and
the cause a stalled stack points at, cheaply, before the full report says more."""

from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

from debug_stuck.tables import load_table


def _patterns() -> dict:
    table = load_table("phases.yaml")
    save, validation = table["checkpoint"], table["validation"]
    return {
        "playbook": save["playbook"],
        "min_weight": float(save["min_weight"]),
        "save_function": re.compile(save["function"]),
        "skip_files": re.compile(save["skip_files"]),
        "validation_function": re.compile(validation["function"]),
        "validation_file": re.compile(validation["file"]),
    }


def _checkpoint_signals(knowledge, playbook: str, min_weight: float) -> list:
    book = knowledge.playbooks.get(playbook) if knowledge is not None else None
    if book is None:
        return []
    return [s for s in book.signals if s.source == "stack" and s.weight >= min_weight]


def phase_of(frames, knowledge=None) -> Optional[Tuple[str, str]]:
    """("checkpoint" | "validation", the frame that says so) for a main thread's frames, or None.

    Checkpoint saves are recognised by the checkpoint-save playbook's stack signals (torch.save,
    safetensors, the usual save functions) and by function names with save/checkpoint/ckpt in them;
    validation by the usual evaluation function names and files.
    """
    p = _patterns()
    signals = _checkpoint_signals(knowledge, p["playbook"], p["min_weight"])
    for frame in frames:
        text = frame.text()
        if p["skip_files"].search(frame.file or ""):
            continue
        if any(s.pattern.search(text) for s in signals):
            return "checkpoint", text
        if not frame.native and p["save_function"].search(frame.bare_name):
            return "checkpoint", text
    for frame in frames:
        if frame.native:
            continue
        if p["validation_function"].match(frame.bare_name) or p["validation_file"].search(frame.file or ""):
            return "validation", frame.text()
    return None


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
