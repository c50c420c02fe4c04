"""Hang: ``torch.save`` blocks opening its destination (cause ``checkpoint-save`` / ``io-stall``).

``<workdir>/ckpt.pt`` is a FIFO with no reader, so the ``open()`` that ``torch.save`` does (in C++,
``PyTorchFileWriter``) blocks for ever: state S, wchan ``wait_for_partner``, ~0% CPU.

py-spy, MainThread idle::

    _open_zipfile_writer_file.__init__ (torch/serialization.py)
    _open_zipfile_writer (torch/serialization.py)
    save (torch/serialization.py)
    save_checkpoint (torch_save_blocked.py)
    main (torch_save_blocked.py)
    <module> (torch_save_blocked.py)

The blocked ``open()`` runs in C++ with the GIL held: the process's other Python threads are frozen
too (a helper thread could not even report the hang).

With ``--after-good-save`` it first saves a complete ``ckpt_000005.pt`` (step 5), then blocks saving
``ckpt_000010.pt`` (the FIFO): the newest *valid* checkpoint and the partial one differ.

READY (``{"pid", "checkpoint", "kernel_wait"}``): written right before ``torch.save``; the spawner
then waits until the main thread sleeps in ``wait_for_partner`` (``kernel_wait``) before returning.
"""

from __future__ import annotations

import os
import sys
import threading

import _common
import torch


def save_checkpoint(model: torch.nn.Module, step: int, path) -> None:
    torch.save({"step": step, "model": model.state_dict()}, path)


def main() -> None:
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    step = 100
    path = _common.workdir() / "ckpt.pt"
    if "--after-good-save" in sys.argv:
        save_checkpoint(model, 5, _common.workdir() / "ckpt_000005.pt")
        print("step 5: saved ckpt_000005.pt", flush=True)
        step, path = 10, _common.workdir() / "ckpt_000010.pt"
    if not path.exists():
        os.mkfifo(path)
    # PyTorchFileWriter opens the file holding the GIL: no thread of this process can run while
    # open() blocks, so READY goes out first and the spawner confirms the kernel wait.
    kernel_wait = {
        "pid": os.getpid(),
        "tid": threading.get_native_id(),
        "wchan": ["wait_for_partner"],
        "syscalls": ["openat", "open"],
    }
    _common.mark_ready(checkpoint=str(path), kernel_wait=kernel_wait)
    print(f"step {step}: saving {path}", flush=True)
    save_checkpoint(model, step, path)
    print("saved (should never happen)", flush=True)


if __name__ == "__main__":
    main()
