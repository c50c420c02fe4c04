"""Hang (for 8 h): a checkpoint copy retries after a failure, with its delay in milliseconds passed to
``time.sleep``, which takes seconds (the fourteenth hunt's j19: "not judged hung ... a work loop
waiting for its next input", and "Compile in-process" as the fix)::

    RETRY_MS = 30000
    for attempt in range(5):
        ...
        time.sleep(RETRY_MS)        # 30000 s

READY (``{"pid", "sleep_line"}``) once the main thread has slept for a few samples.
"""

from __future__ import annotations

import inspect
import logging
import os
import shutil
import time

import _common

RETRY_MS = 30000


def save_with_retry(src: str, dst: str) -> None:
    for attempt in range(5):
        try:
            shutil.copy(src, dst)
            return
        except OSError as err:
            logging.warning("copy to %s failed (%s), attempt %d, retrying in %d ms", dst, err, attempt, RETRY_MS)
            time.sleep(RETRY_MS)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    source, first = inspect.getsourcelines(save_with_retry)
    line = first + next(i for i, text in enumerate(source) if text.strip().startswith("time.sleep("))
    _common.ready_when(_common._main_sleeps_in("save_with_retry"), lambda: {"pid": os.getpid(), "sleep_line": line})
    ckpt = os.path.join(_common.workdir(), "ckpt.pt")
    for epoch in range(3):
        with open(ckpt, "wb") as f:
            f.write(bytes(4096))  # the epoch's checkpoint
        logging.info("epoch %d done", epoch)
        save_with_retry(ckpt, "/nonexistent-bucket/ckpt.pt")
