"""Hang (for a day): a checkpoint upload thread obeys a server's ``Retry-After: 86400`` in one
``time.sleep``, and the trainer waits for the upload's future before the next epoch
(``python retry_after.py``; the twelfth hunt's j19: "sleeps in a loop ... polls for a condition", a
deadline for a loop that is not there).

READY (``{"pid", "sleep_line"}``) once the main thread has slept in ``result`` for a few samples.
"""

from __future__ import annotations

import inspect
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import _common


def upload(path: str, attempt: int = 0) -> str:
    retry_after = 86400 if attempt == 0 else 1  # the object store answered 503, "Retry-After: 86400"
    print(f"upload of {path} throttled, retrying after {retry_after}s", flush=True)
    time.sleep(retry_after)
    return path


if __name__ == "__main__":
    source, first = inspect.getsourcelines(upload)
    line = first + next(i for i, text in enumerate(source) if text.strip().startswith("time.sleep("))
    main = threading.main_thread()
    waits = _common._main_sleeps_in("result")
    _common.ready_when(waits, lambda: {"pid": os.getpid(), "sleep_line": line})
    pool = ThreadPoolExecutor(1, thread_name_prefix="uploader")
    pending = None
    for epoch in range(3):
        print(f"epoch {epoch} done", flush=True)
        if pending is not None:
            pending.result()  # waits for the previous upload
        pending = pool.submit(upload, f"ckpt_{epoch}.pt")
