"""Which long phase a main thread is in: a checkpoint save, a validation pass, sample generation or
a compilation, recognised on its stack with the patterns of skills/data/phases.yaml and the frame
table (watch's allowance, the report's phase, the phase of a pasted dump's straggler). Frames live
or pasted: anything with `function`, `file`, `native`, `bare_name` and `text()`.

A phase is named only from a frame that means it: a save (the checkpoint-save playbook's stack
signals, a function named as a save), an evaluation loop (its own function, its framework's or
script's eval file, a torch.no_grad-wrapped eval function), a sample-generation function. A word
inside any function name is not enough: `validate_token` checks a token, it is not a validation
pass; `load_checkpoint` is no save."""

from __future__ import annotations

import re
from typing import Optional, Tuple

from debug_stuck.core.libfacts import match_frame

_NEVER = re.compile(r"(?!)")


def _regex(section: dict, key: str) -> re.Pattern:
    return re.compile(section[key]) if section.get(key) else _NEVER


def _patterns(table: dict) -> dict:
    save, validation, sampling = table["checkpoint"], table["validation"], table.get("sampling") or {}
    return {
        "playbook": save["playbook"],
        "min_weight": float(save["min_weight"]),
        "save_function": re.compile(save["function"]),
        "skip_files": re.compile(save["skip_files"]),
        "validation_function": re.compile(validation["function"]),
        "validation_file": re.compile(validation["file"]),
        "validation_skip_files": _regex(validation, "skip_files"),
        "no_grad_frame": _regex(validation, "no_grad_frame"),
        "no_grad_function": _regex(validation, "no_grad_function"),
        "sampling_function": _regex(sampling, "function"),
    }


def _checkpoint_signals(knowledge, playbook: str, min_weight: float) -> list:
    book = knowledge.playbooks.get(playbook) if knowledge is not None else None
    if book is None:
        return []
    return [s for s in book.signals if s.source == "stack" and s.weight >= min_weight]


def _in_validation(frames, i: int, p: dict) -> bool:
    frame = frames[i]
    if p["validation_function"].match(frame.bare_name):
        return True
    if p["validation_skip_files"].search(frame.file or ""):
        return False
    if p["validation_file"].search(frame.file or ""):
        return True
    outer = frames[i + 1] if i + 1 < len(frames) else None  # frames run innermost first
    return (
        outer is not None and p["no_grad_frame"].search(outer.text()) and p["no_grad_function"].match(frame.bare_name)
    )


def phase_of(frames, knowledge) -> Optional[Tuple[str, str]]:
    """("checkpoint" | "validation" | "sampling" | "compile", the frame that says so) for a main thread's frames
    (innermost first), or None.

    Checkpoint saves are recognised by the checkpoint-save playbook's stack signals (torch.save,
    safetensors, the usual save functions) and by functions named as a save; validation by
    evaluation loops' own functions and files; sampling by sample-generation functions.
    """
    if not getattr(knowledge, "phases", None):
        return None
    p = _patterns(knowledge.phases)
    frames = list(frames)
    signals = _checkpoint_signals(knowledge, p["playbook"], p["min_weight"])
    for frame in frames:
        text = frame.text()
        if p["skip_files"].search(frame.file or ""):
            continue
        if any(s.pattern.search(text) for s in signals):
            return "checkpoint", text
        if not frame.native and p["save_function"].match(frame.bare_name):
            return "checkpoint", text
    for i, frame in enumerate(frames):
        if frame.native:
            continue
        if _in_validation(frames, i, p):
            return "validation", frame.text()
        if p["sampling_function"].match(frame.bare_name):
            return "sampling", frame.text()
    return _compiling(frames, knowledge)


def _compiling(frames, knowledge) -> Optional[Tuple[str, str]]:
    """("compile", the frame) when a frame of the stack is one the frame table says compiles
    (skills/data/frames.yaml `wait: compile`: Dynamo converting a frame, Inductor generating or
    building code, Triton compiling, XLA compiling). A compiled model's forward pass runs through
    eval_frame.py, which no such entry names: only compiling itself counts."""
    table = getattr(knowledge, "frames", None) or []
    for frame in frames if table else ():
        entry = match_frame(table, frame.function, frame.file)
        if entry is not None and entry.get("wait") == "compile":
            return "compile", frame.text()
    return None
