"""A multiprocessing Pool whose result-handler (or task-handler) thread waits for a result of the same
pool.

CPython 3.11.7 Lib/multiprocessing/pool.py: one thread, Pool._handle_results, takes every result off
the pool's result queue and sets its ApplyResult, which runs the task's `callback` in that thread
(ApplyResult._set). A callback that calls pool.apply(), or .get() on another result of the pool,
waits for a result only that thread could deliver: it never comes, and every later result with it
(the docs: "Callbacks should complete immediately since otherwise the thread which handles the
results will get blocked"). Pool._handle_tasks, the one thread that hands tasks to the workers,
iterates the iterable given to imap or map as it goes: a generator that calls pool.apply() waits for
a task that only that thread would hand out.
"""

from __future__ import annotations

import re
from typing import Optional

from debug_stuck.live.parties import JobView, python_frames

POOL_FILE = re.compile(r"(^|/)multiprocess(ing)?/pool\.py$")
# a wait for one of the pool's own results: ApplyResult.get/wait (MapResult's too), Pool.apply/map
_RESULT_WAITS = ("wait", "get", "apply", "map", "starmap")


def callback_waits_on_pool(job: JobView, hop) -> Optional[str]:
    """The callback (`function (file:line)`) running in the process's pool result-handler thread
    while it waits for a result of the pool; sets the hop's `end` callback-waits-pool, `callback`."""
    for thread in job.threads(hop.pid):
        frames = python_frames(thread.frames)
        handler = next(
            (i for i, f in enumerate(frames) if f.bare_name in _SAYS and POOL_FILE.search(f.file or "")),
            None,
        )
        if handler is None:
            continue
        inner = frames[:handler]
        waits = any(f.bare_name in _RESULT_WAITS and POOL_FILE.search(f.file or "") for f in inner)
        callback = next((f for f in reversed(inner) if not POOL_FILE.search(f.file or "")), None)
        if not waits or callback is None:
            continue
        end, fact, role, what, outcome = _SAYS[frames[handler].bare_name]
        hop.kind, hop.object = "thread", str(thread.tid)
        hop.facts.update({"end": end, fact: callback.text()})
        hop.detail = (
            f"waits for a result from its pool, and the pool's {role} thread runs the {what} {callback.text()}, "
            f"which itself waits for a result of that pool: {outcome}"
        )
        return callback.text()
    return None


# per handler thread: the hop's end, its fact, the thread's role, what of the job's it runs, the outcome.
# The result handler runs callbacks; the task handler iterates the iterable given to map/imap, lazily
# (Pool._handle_tasks: `for task in taskseq`, a generator over the job's iterable).
_SAYS = {
    "_handle_results": (
        "callback-waits-pool",
        "callback",
        "result-handler",
        "callback",
        "only that thread delivers results, so neither ever comes",
    ),
    "_handle_tasks": (
        "iterable-waits-pool",
        "iterable",
        "task-handler",
        "iterable handed to it,",
        "only that thread hands tasks to the workers, so the task it waits for is never handed out",
    ),
}
