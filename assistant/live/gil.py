"""The GIL as a wait: a thread that holds it while it blocks, and the threads that wait to take it.

CPython runs one thread's Python code at a time: a thread holds the global interpreter lock (GIL)
to run, and C code gives it up around a call that may block (Py_BEGIN_ALLOW_THREADS: the socket,
file, sleep and lock functions of the standard library do; ctypes.CDLL calls do, ctypes.PyDLL calls
do not; pybind11 only under `gil_scoped_release`; Cython only in a `with nogil:` block). A thread
blocked in native code with the GIL held stops every other Python thread of its process: each
waits in take_gil (CPython 3.11.7 Python/ceval_gil.h) as soon as it wants to run Python again.

The evidence: the stack reader's own mark of the GIL's owner (py-spy's `owns_gil`, pystack's
`gil`), the same thread in every sample of the window, not running; and a waiter's native frames,
take_gil by name, or, where the interpreter's symbols are stripped, a condition-variable wait
called from the interpreter: on Linux CPython's thread locks are semaphores (Python/thread_pthread.h,
USE_SEMAPHORES), so a pthread condition wait inside the interpreter is the GIL's (take_gil's
COND_TIMED_WAIT).
"""

from __future__ import annotations

import re
from typing import List, Optional

from debug_stuck.core.libfacts import innermost_wait
from debug_stuck.live.jobfacts import frames_table
from debug_stuck.live.loops import INTERPRETER_CODE
from debug_stuck.live.parties import JobView, python_frames

# glibc's names for a condition-variable wait (the versioned and internal aliases py-spy may print)
COND_WAIT = re.compile(r"^_*(pthread_cond_(timed|clock)?wait(64)?|__pthread_cond_wait_common)(@\S+)?$")
LIBC = re.compile(r"^(libc[.-]\S*|libpthread\S*)$")
# the GIL's owner read in this state runs Python with it, as every running thread does: not blocked
NOT_BLOCKED = ("running",)


def _object_name(frame) -> str:
    return (frame.module or frame.file or "").replace("\\", "/").rsplit("/", 1)[-1]


def waits_for_gil(frames) -> Optional[str]:
    """The interpreter function in which the thread waits to take the GIL (take_gil, or the caller of
    a condition wait inside the interpreter: `time_sleep` on its way back from a sleep, the eval loop
    that py-spy shows as the Python frame it runs), or None. `frames` innermost first."""
    native = [f for f in frames if f.native]
    if not native:
        return None
    found = innermost_wait(frames_table() or [], [(f.function, f.file) for f in native])
    if found is not None and found[1].get("wait") == "gil":
        return native[found[0]].function
    named = [f for f in frames if not (f.native and f.function.startswith("0x"))]
    cond_wait = len(named) >= 2 and named[0].native and COND_WAIT.match(named[0].function)
    if cond_wait and LIBC.match(_object_name(named[0])):
        caller = named[1]  # py-spy shows the eval loop as the Python frame it runs
        name = _object_name(caller)
        if not caller.native or (INTERPRETER_CODE.match(name) and not LIBC.match(name)):
            return caller.function if caller.native else "the eval loop"
    return None


def idle_gil_holder(job: JobView, pid: int):
    """The thread of `pid` that held the GIL in every stack sample of the window (two or more) and was
    not running: blocked with the GIL held. None when no thread did, or a single sample was read."""
    series = job.snap.stacks.get(pid)
    dumps = [d for d in (series.dumps if series is not None else []) if d.threads]
    if len(dumps) < 2:
        return None
    holders = {t.tid for t in dumps[0].threads if t.holds_gil}
    for dump in dumps[1:]:
        holders &= {t.tid for t in dump.threads if t.holds_gil}
    for tid in sorted(holders):
        idle = all(t.state == "idle" for d in dumps for t in d.threads if t.tid == tid)
        wait = job.wait(pid, tid) or {}
        if wait.get("op") in NOT_BLOCKED or (not idle and not wait.get("op")):
            continue
        return next(t for t in dumps[-1].threads if t.tid == tid)
    return None


def gil_waiters(job: JobView, pid: int, holder_tid: int) -> List:
    """The threads of `pid` other than the holder that wait to take the GIL, in the latest sample."""
    return [t for t in job.threads(pid) if t.tid != holder_tid and waits_for_gil(t.frames)]


def waiter_text(threads) -> str:
    """ "thread 'writer' at writer (job.py:10)", for up to three waiters."""
    parts = []
    for t in threads[:3]:
        py = python_frames(t.frames)
        parts.append(f"thread {t.name!r}" + (f" at {py[0].text()}" if py else ""))
    more = len(threads) - 3
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def to_gil_holder(job: JobView, hop, thread) -> Optional[int]:
    """The holder's thread id when this hop's thread waits to take the GIL that another thread of its
    process holds while blocked (the chain goes on there), else None. Fills the hop. A waiter read as
    running is one still: take_gil waits 5 ms at a time (CPython 3.11.7 Python/ceval_gil.h, the
    switch interval's COND_TIMED_WAIT) and then asks the holder to drop it, so a read of its system
    call can catch it awake between two waits; its stack in take_gil says what it does."""
    if hop.op not in ("futex", "running") or thread is None or not waits_for_gil(thread.frames):
        return None
    holder = idle_gil_holder(job, hop.pid)
    if holder is None or holder.tid == thread.tid:
        return None
    hop.kind, hop.object = "thread", str(holder.tid)
    hop.facts.pop("loop", None)  # a waiter read as running was taken for its own loop
    hop.facts["gil"] = "wait"
    hop.detail = (
        "waits to take the GIL (Python's global interpreter lock)"
        + (f" at {hop.where}" if hop.where else "")
        + f"; thread {holder.name!r} holds it while it is blocked"
    )
    return holder.tid


def note_gil_holder(job: JobView, hop, after_waiter: bool = False) -> None:
    """A hop whose thread is blocked with the GIL held: every other Python thread of its process waits
    behind it; when it waits on a native lock, a waiter that holds that lock can never let it go.
    Said only when another thread waits for the GIL. `after_waiter`: the chain came here from a thread
    waiting for the GIL, which says so itself."""
    holder = idle_gil_holder(job, hop.pid)
    if holder is None or holder.tid != hop.tid or hop.kind in ("process", "cpu", "device"):
        return
    waiters = gil_waiters(job, hop.pid, holder.tid)
    if not waiters and not after_waiter:
        return  # no other thread wants the GIL: holding it changes nothing (torch.save opens its file so)
    hop.facts["gil"] = "held"
    call = native_call(hop.frames) if hop.kind == "futex" else None
    if call is not None:
        hop.detail = f"is blocked in {call}" + (f", called at {hop.where}" if hop.where else "")
    if after_waiter:
        return  # the waiter's hop says it waits for the GIL this thread holds
    verb = "waits" if len(waiters) == 1 else "wait"
    hop.detail += f", holding the GIL (Python's global interpreter lock): {waiter_text(waiters)} {verb} to take it"
    hop.detail += ", and no Python code of the process runs until it returns"
    if hop.kind == "futex" and "end" not in hop.facts:
        hop.facts["end"] = "gil-held"


def native_call(frames) -> Optional[str]:
    """ "pthread_mutex_lock (libc.so.6), through ctypes": the innermost named native frame a thread
    blocks in, and the library that called it when it is ctypes' (libffi) or another library's."""
    native = [f for f in frames if f.native and not f.function.startswith("0x")]
    if not native:
        return None
    text = f"{native[0].shown_name} ({_object_name(native[0])})"
    caller = next((f for f in native[1:] if not LIBC.match(_object_name(f))), None)
    if caller is not None:
        name = _object_name(caller)
        if name.startswith("libffi") or "_ctypes" in name or caller.function.startswith("_ctypes"):
            text += ", through ctypes"
        elif not INTERPRETER_CODE.match(name) and "/lib-dynload/" not in (caller.module or ""):
            text += f", from {caller.function} ({name})"
    return text
