"""Whose code a frame is, and whether a busy thread turns in one loop of its own code.

Two samples of a busy thread cannot tell a long computation from an endless loop by motion alone:
both change line. What separates them is where the time goes. A thread that never leaves one
function of the job's own code, calling at most the standard library (``os.path.exists``,
``time.time``), turns in a loop of its own: nothing outside it can end the loop but a condition
it polls. A thread whose samples go down into a library's compute (a model's forward through
torch, numpy) is doing work that ends when the data does. The first is stuck on its own loop;
the second is busy, which is progress until other evidence (the log's rhythm) says otherwise.
"""

from __future__ import annotations

from typing import List, Optional

from debug_stuck.core.owncode import STDLIB, is_library_code


def is_stdlib(frame) -> bool:
    top = (frame.file or "").replace("\\", "/").lstrip("./").split("/", 1)[0]
    top = top[:-3] if top.endswith(".py") else top
    return top in STDLIB or top.startswith("<frozen")


def is_library(frame) -> bool:
    """A frame of the standard library or a library, not the job's own code (core.owncode)."""
    return is_library_code(frame.file, frame.path)


def own_frame_index(frames) -> Optional[int]:
    """The index (innermost first) of the innermost Python frame of the job's own code."""
    for index, frame in enumerate(frames):
        if not frame.native and not is_library(frame):
            return index
    return None


def _samples(series, tid: int) -> List[list]:
    out = []
    for dump in series.dumps if series is not None else []:
        thread = next((t for t in dump.threads if t.tid == tid), None)
        if thread is not None:
            out.append(list(thread.frames))
    return out


def own_loop(series, tid: int):
    """The frame of the job's own code in which the thread turns, or None.

    It turns there when, in every sample (at least two), its innermost frame of the job's own code
    is the same function and nothing below it but the standard library runs."""
    samples = _samples(series, tid)
    if len(samples) < 2:
        return None
    owners = set()
    last = None
    for frames in samples:
        index = own_frame_index(frames)
        if index is None:
            return None
        if any(not f.native and not is_stdlib(f) for f in frames[:index]):
            return None  # it went down into a library's code: work, not a poll
        owner = frames[index]
        owners.add((owner.bare_name, owner.file))
        last = owner
    return last if len(owners) == 1 else None
