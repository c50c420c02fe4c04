"""Hang: Lightning DDP on CPU (gloo, 2 ranks) where only rank 0 calls ``trainer.save_checkpoint``.

Run as a user runs it: ``python lightning_rank0_save.py``. ``Trainer(accelerator="cpu", devices=2,
strategy="ddp")`` starts rank 1 itself (Lightning's subprocess launcher re-runs this script with
``LOCAL_RANK=1``); the launching process is rank 0. A tiny ``nn.Linear`` model is fitted for 2 steps
on random tensors (no download), then::

    if trainer.global_rank == 0:
        trainer.save_checkpoint(path)   # has a barrier inside: rank 1 never enters it
    trainer.validate(model, loader)     # rank 1 goes on; its first collective is a broadcast

Rank 0 waits in ``barrier`` under ``Trainer.save_checkpoint``; rank 1 waits in ``broadcast`` under
``broadcast_object_list`` (``DDPStrategy.broadcast``, ``Trainer.log_dir``). Each waits for the
other for ever (process group timeout 1 h).

READY (``{"pid": rank 0, "rank0_pid", "rank1_pid", "checkpoint"}``): written by rank 0 once both
main threads have sat in their collective for 5 consecutive samples (each rank announces its own
wait in ``<workdir>/waiting-<rank>``).
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta

import _common
import lightning as L
import torch
from lightning.pytorch.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TinyRegression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self.layer(x), y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def announce_wait(rank: int, functions: tuple) -> None:
    """Write waiting-<rank> once the main thread sleeps inside one of `functions`."""
    main = threading.main_thread()

    def waiting() -> bool:
        names = _common.stack_functions(main.ident)
        return any(f in names for f in functions) and _common.sleeping_steadily(os.getpid(), main.native_id)

    def watch() -> None:
        if _common.wait_until(waiting, timeout=120):
            _common.write_marker(f"waiting-{rank}")
            if rank == 0:
                both = _common.wait_until(lambda: _common.read_marker("waiting-1") is not None, timeout=120)
                if both:
                    other = _common.read_marker("waiting-1")
                    path = str(_common.workdir() / "final.ckpt")
                    _common.mark_ready(rank0_pid=os.getpid(), rank1_pid=other["pid"], checkpoint=path)

    threading.Thread(target=watch, name="zoo-ready-watch", daemon=True).start()


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    loader = DataLoader(data, batch_size=4)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(hours=1)),
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(_common.workdir()),
    )
    model = TinyRegression()
    trainer.fit(model, loader)
    rank = trainer.global_rank
    announce_wait(rank, ("barrier",) if rank == 0 else ("broadcast",))
    if rank == 0:
        trainer.save_checkpoint(str(_common.workdir() / "final.ckpt"))  # the bug: only rank 0 saves
    trainer.validate(model, loader)


if __name__ == "__main__":
    main()
