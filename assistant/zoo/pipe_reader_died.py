"""Hang: a checkpoint streamed into a compressor child that has exited, through a pipe the parent
never closed its read end of.

``python pipe_reader_died.py``::

    r, w = os.pipe()
    compressor = subprocess.Popen(compress_cmd, stdin=r, stdout=out)
    # the bug: the parent keeps its copy of r
    with os.fdopen(w, "wb") as f:
        torch.save(state, f)

The compressor rejects its options and exits with code 1 at once. Had the parent closed ``r``, the
write would fail with BrokenPipeError; the parent still holds it, so the pipe has a reader (the
parent itself) and the write blocks once the pipe's 64 KiB are full (the ninth hunt's h09, read as a
slow checkpoint write, with no word of the dead child).

READY (``{"pid", "child_pid"}``): once the child is a zombie and the parent has sat in its write for
5 consecutive samples.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import _common

# a compressor that rejects its options, as `zstd --fast=11 -c` or `gzip --bogus -c` does
COMPRESSOR = "import sys; sys.exit('compressor: unrecognized option --fast=11')"


def main() -> None:
    import torch

    r, w = os.pipe()
    out = open(_common.workdir() / "ckpt.pt.zst", "wb")
    compressor = subprocess.Popen([sys.executable, "-I", "-c", COMPRESSOR], stdin=r, stdout=out)
    main_thread = threading.main_thread()

    def stuck() -> bool:
        writing = _common.blocked_in(os.getpid(), main_thread.native_id, ("pipe_write", "anon_pipe_write"), ("write",))
        return _common.task_state(compressor.pid) == "Z" and writing

    _common.ready_when(stuck, lambda: {"child_pid": compressor.pid})
    state = {"weights": torch.randn(512, 512), "step": 1200}
    print("saving checkpoint step 1200", flush=True)
    with os.fdopen(w, "wb") as f:
        torch.save(state, f)  # blocks once the pipe is full: its only reader left is this process
    print("saved, compressor exit code", compressor.wait(), flush=True)


if __name__ == "__main__":
    main()
