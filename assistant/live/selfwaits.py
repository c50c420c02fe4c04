"""Waits a library documents as deadlocks of the thread's own making, read from its stack:

- socketserver: `BaseServer.shutdown` "must be called while serve_forever() is running in a
  different thread otherwise it will deadlock" (Python docs, socketserver). A handler that calls it
  runs inside serve_forever on the same thread: shutdown waits for a loop that cannot end.
- imports: "an import should not have the side effect of spawning a new thread and then waiting for
  that thread in any way. Failing to abide by this restriction can lead to a deadlock if the spawned
  thread directly or indirectly attempts to import a module" (Python docs, threading, Importing in
  threaded code). The thread waits for the module lock that the importing thread holds while it joins.
"""

from __future__ import annotations

import re

from debug_stuck.live.parties import python_frames

SOCKETSERVER = re.compile(r"(^|/)socketserver\.py$")
THREADING = re.compile(r"(^|/)threading\.py$")
IMPORTLIB = re.compile(r"^<frozen importlib\._bootstrap(_external)?>$|(^|/)importlib/_bootstrap(_external)?\.py$")


def server_shuts_itself_down(hop, thread) -> bool:
    """Mark hop (`end` self-shutdown) when its thread waits in socketserver's shutdown() called from a
    handler that its own serve_forever runs."""
    py = python_frames(thread.frames) if thread is not None else []
    names = [(f.bare_name, bool(SOCKETSERVER.search(f.file or ""))) for f in py]
    if ("shutdown", True) not in names[:4] or ("serve_forever", True) not in names:
        return False
    handler = next(
        (f for f in py if not SOCKETSERVER.search(f.file or "") and not THREADING.search(f.file or "")), None
    )
    at = f" at {handler.text()}" if handler is not None else ""
    hop.facts["end"] = "self-shutdown"
    hop.detail = (
        f"calls the server's shutdown(){at}, from a handler that its own serve_forever runs on this thread: "
        "shutdown waits for serve_forever's loop to end, which cannot end while this handler runs"
    )
    return True


def import_lock_join(job, hop, thread) -> bool:
    """Mark hop (`end` import-join) when its thread waits for a module lock (importlib's
    _ModuleLock.acquire) while another thread of its process joins a thread from inside an import."""
    py = python_frames(thread.frames) if thread is not None else []
    if not any(f.bare_name == "acquire" and IMPORTLIB.search(f.file or "") for f in py[:3]):
        return False
    for joiner in job.threads(hop.pid):
        frames = python_frames(joiner.frames) if joiner.tid != thread.tid else []
        if not any(f.bare_name == "join" and THREADING.search(f.file or "") for f in frames[:3]):
            continue
        if not any(IMPORTLIB.search(f.file or "") for f in frames):
            continue
        own = next(
            (f for f in frames if not IMPORTLIB.search(f.file or "") and not THREADING.search(f.file or "")), None
        )
        at = f" at {own.text()}" if own is not None else ""
        hop.facts["end"] = "import-join"
        hop.detail = (
            f"waits for the import lock of a module that thread {joiner.name!r} is still importing, while that "
            f"thread joins threads{at}: a thread started and waited for at import time cannot import that module"
        )
        return True
    return False
