"""Hang: an HF ``Trainer`` callback that runs ``all_reduce`` on rank 0 only (CPU, gloo, 2 ranks).

Run under the launcher, as the spawner does::

    python -m torch.distributed.run --nproc_per_node=2 --master_addr=127.0.0.1 \\
        --master_port=<free port> assistant/zoo/hf_trainer_callback.py

The model is built in code (one ``nn.Linear`` returning ``{"loss", "logits"}``), the data is random
(no download); ``TrainingArguments(use_cpu=True, ddp_backend="gloo", logging_steps=2)``. A callback
averages a metric across ranks at step 2, but only on the main process::

    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and state.global_step == 2:
            dist.all_reduce(metric)

Rank 0 waits in ``all_reduce`` under ``on_step_end``; rank 1 has gone on to the logging of step 2
and waits in ``all_gather`` (``nested_gather`` of the loss in ``_maybe_log_save_evaluate``).

READY (``{"pid": rank 0, "rank0_pid", "rank1_pid"}``): written by rank 0 once both main threads have
sat in their collective for 5 consecutive samples (each rank announces ``<workdir>/waiting-<rank>``).
"""

from __future__ import annotations

import os

import _common
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainerCallback, TrainingArguments

SYNC_STEP = 2


class TinyRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 1)

    def forward(self, x, labels=None):
        out = self.layer(x)
        return {"loss": nn.functional.mse_loss(out, labels), "logits": out}


class RandomRegression(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        x = torch.randn(4, generator=torch.Generator().manual_seed(index))
        return {"x": x, "labels": x.sum(0, keepdim=True)}


class AverageMetricCallback(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and state.global_step == SYNC_STEP:  # the bug: rank 0 only
            metric = torch.tensor([float(state.global_step)])
            dist.all_reduce(metric)


def main() -> None:
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    _common.announce_rank_wait(rank, "all_reduce" if rank == 0 else "all_gather")
    args = TrainingArguments(
        output_dir=str(_common.workdir() / "out"),
        per_device_train_batch_size=4,
        max_steps=10,
        logging_steps=SYNC_STEP,
        use_cpu=True,
        ddp_backend="gloo",
        ddp_timeout=3600,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=TinyRegressor(), args=args, train_dataset=RandomRegression(), callbacks=[AverageMetricCallback()]
    )
    trainer.train()


if __name__ == "__main__":
    main()
