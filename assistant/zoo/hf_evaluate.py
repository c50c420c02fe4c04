"""Not hung: the Hugging Face ``Trainer`` evaluating a long evaluation set with a silent log (CPU).

A small BERT built from its config (no download), ``TrainingArguments(use_cpu=True,
disable_tqdm=True, report_to="none")``, ``trainer.evaluate()`` over a million random examples: a
long pass that prints nothing. Every layer of a transformers 5 model runs its forward through
``GradientCheckpointingLayer``'s ``forward_with_checkpointing`` (transformers/modeling_layers.py),
activation checkpointing's wrapper, which is no checkpoint save.

py-spy, MainThread: ``BertLayer.forward`` <- ``forward_with_checkpointing`` <- ... <-
``Trainer.prediction_step`` <- ``Trainer.evaluation_loop`` <- ``Trainer.evaluate`` <- ``main``.

READY (``{"pid", "prediction_steps"}``): written by a callback at the 5th prediction step.
"""

from __future__ import annotations

import os

import _common
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, index: int):
        return {"input_ids": torch.randint(0, 1000, (64,)), "labels": torch.tensor(index % 2)}


class ReadyAfterFiveSteps(TrainerCallback):
    steps = 0

    def on_prediction_step(self, args, state, control, **kwargs):
        self.steps += 1
        if self.steps == 5:
            _common.mark_ready(pid=os.getpid(), prediction_steps=self.steps)


def main() -> None:
    torch.set_num_threads(1)
    config = BertConfig(
        vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128
    )
    args = TrainingArguments(
        output_dir=str(_common.workdir() / "out"),
        per_device_eval_batch_size=8,
        use_cpu=True,
        report_to="none",
        disable_tqdm=True,
    )
    model = BertForSequenceClassification(config)
    trainer = Trainer(model=model, args=args, eval_dataset=Tokens(), callbacks=[ReadyAfterFiveSteps()])
    trainer.evaluate()


if __name__ == "__main__":
    main()
