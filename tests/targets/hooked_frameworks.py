"""Target for test_hook_frameworks: 3 training steps under Lightning or the HF Trainer with the
debug_stuck.hook callback, then prints the hook's marker and heartbeat as JSON (before exit
removes them). Usage: hooked_frameworks.py lightning|hf OUTPUT_DIR"""

from __future__ import annotations

import json
import os
import sys

import torch
from torch import nn

import debug_stuck.hook as hook


def report() -> None:
    folder = hook.hook_dir()
    marker = json.loads(open(os.path.join(folder, f"{os.getpid()}.json")).read())
    beat = open(marker["heartbeat"]).read().split()
    print(json.dumps({"marker": marker, "heartbeat": beat}), flush=True)


def lightning_run() -> None:
    import lightning.pytorch as pl

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            return self.layer(batch).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=2)
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[hook.LightningHeartbeat()],
    )
    trainer.fit(Tiny(), loader)


def hf_run(output_dir: str) -> None:
    from transformers import Trainer, TrainingArguments

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(4, 1)

        def forward(self, x):
            return {"loss": self.layer(x).pow(2).mean()}

    data = [{"x": torch.randn(4)} for _ in range(8)]
    args = TrainingArguments(
        output_dir=output_dir,
        max_steps=3,
        per_device_train_batch_size=2,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    collate = lambda rows: {"x": torch.stack([r["x"] for r in rows])}  # noqa: E731
    Trainer(
        model=Tiny(), args=args, train_dataset=data, data_collator=collate, callbacks=[hook.TrainerHeartbeat()]
    ).train()


if __name__ == "__main__":
    if sys.argv[1] == "lightning":
        lightning_run()
    else:
        hf_run(sys.argv[2])
    report()
