"""The child a multiprocessing wait depends on, when it spins in a poll of its own.

A process waiting at a multiprocessing Event, Condition or Semaphore is released by another process
of the job. When exactly one of its children runs on its CPU inside a `while <condition>` loop of
its own code whose stack stays at one line (a spin on a shared flag: `while not start.value: pass`),
that child waits for something too, and is most likely the party: a handshake in the wrong order
(the parent raises the flag only after the child's Event), each waiting for the other.
"""

from __future__ import annotations

import ast
from typing import Optional

from debug_stuck.live.loops import loop_header, own_frame_index
from debug_stuck.live.parties import POLL_LOOP, JobView
from debug_stuck.live.progress import running
from debug_stuck.live.selflock import frame_source, parse_source
from debug_stuck.probes.collectors.procs import is_library_helper


def spinning_child(job: JobView, pid: int) -> Optional[tuple]:
    """(the child's pid, its loop header, where) or None."""
    found = []
    for child in job.children(pid):
        info = job.procs[child]
        if is_library_helper(info.cmdline) or not running(info):
            continue
        thread = job.thread(child)
        series = job.snap.stacks.get(child)
        if thread is None or series is None or len(_own_lines(series, child)) != 1:
            continue  # its own code moved: it works (a spin's own line stays, whatever it calls)
        frame = _own_frame(thread.frames)
        header = _spin_header(frame_source(frame, child) or "", frame.line or 0) if frame is not None else None
        if header and POLL_LOOP.match(header):
            found.append((child, header, frame.text()))
    return found[0] if len(found) == 1 else None


def _spin_header(source: str, line: int) -> Optional[str]:
    """The `while` loop at `line`: its header when the line is the header itself (a spin whose body is
    `pass` runs its condition only), else the innermost loop whose body holds it (loop_header)."""
    tree = parse_source(source)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.While) and node.lineno == line:
            return "while " + " ".join(ast.unparse(node.test).split())
    return loop_header(source, line)


def _own_frame(frames):
    """The innermost frame of the job's own code that is a file of its own: multiprocessing's shared
    values run generated code (`getvalue` in "<string>", Lib/multiprocessing/sharedctypes.py)."""
    start = own_frame_index(frames)
    if start is None:
        return None
    return next((f for f in frames[start:] if not f.native and not (f.file or "").startswith("<")), None)


def _own_lines(series, pid: int) -> set:
    """(function, line) of the main thread's own frame (_own_frame), in each sample."""
    out = set()
    for dump in series.dumps:
        thread = next((t for t in dump.threads if t.tid == pid), None)
        frame = _own_frame(thread.frames) if thread is not None else None
        out.add((frame.bare_name, frame.line) if frame is not None else None)
    return out
