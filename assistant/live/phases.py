"""Which long phase a main thread is in: a checkpoint save or a validation pass, recognised on its
stack with the patterns of skills/data/phases.yaml (watch's allowance, the report's phase)."""

from __future__ import annotations

import re
from typing import Optional, Tuple

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
