"""Real checkpoint layouts, written the way each framework writes them (for the resume tests).

Torch files are real ``torch.save`` zips (or the legacy pickle format); safetensors files are
written by hand per the format spec (8-byte little-endian header size, JSON header, raw data).
``truncate`` cuts a file the way a save interrupted by a hang leaves it. ``age`` sets mtimes so
that "newest" does not depend on the file system's timestamp resolution.
"""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path
from typing import Dict, Iterable, Optional

import torch


def torch_file(path: Path, obj=None, legacy: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    obj = {"weight": torch.ones(4, 4)} if obj is None else obj
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return path


def safetensors_file(path: Path, tensors: Optional[Dict[str, int]] = None) -> Path:
    """A valid safetensors file of float32 tensors {name: number of elements}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = tensors or {"lora_down.weight": 16, "lora_up.weight": 16}
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, count in tensors.items():
        header[name] = {"dtype": "F32", "shape": [count], "data_offsets": [offset, offset + 4 * count]}
        offset += 4 * count
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # the spec pads the header to 8 bytes with spaces
    data = b"".join(struct.pack(f"<{count}f", *([0.5] * count)) for count in tensors.values())
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def truncate(path: Path, keep: float = 0.5) -> Path:
    """Cut the file to a fraction of its size: the end (zip central directory, tensor data) is gone."""
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(max(1, int(size * keep)))
    return path


def age(paths: Iterable[Path], start: Optional[float] = None, step: float = 60.0) -> None:
    """Give paths increasing mtimes, oldest first (a folder and everything in it get the same one)."""
    t = start if start is not None else time.time() - 3600
    for path in paths:
        targets = [path, *path.rglob("*")] if path.is_dir() else [path]
        for target in targets:
            os.utime(target, (t, t))
        t += step


def hf_checkpoint(output_dir: Path, step: int, broken: Optional[str] = None) -> Path:
    """``output_dir/checkpoint-<step>`` as the HF Trainer writes it. broken: model|optimizer|state."""
    d = output_dir / f"checkpoint-{step}"
    d.mkdir(parents=True, exist_ok=True)
    safetensors_file(d / "model.safetensors", {"linear.weight": 64, "linear.bias": 8})
    (d / "config.json").write_text(json.dumps({"model_type": "toy"}))
    torch_file(d / "optimizer.pt", {"state": {0: {"exp_avg": torch.zeros(8)}}, "param_groups": [{"lr": 1e-4}]})
    torch_file(d / "scheduler.pt", {"last_epoch": step})
    torch_file(d / "rng_state.pth", {"python": 1, "torch": torch.get_rng_state()})
    state = {"global_step": step, "epoch": step / 1000, "log_history": [{"loss": 1.0, "step": step}]}
    (d / "trainer_state.json").write_text(json.dumps(state))
    (d / "training_args.bin").write_bytes(b"\x80\x04N.")
    if broken == "model":
        truncate(d / "model.safetensors")
    elif broken == "optimizer":
        truncate(d / "optimizer.pt")
    elif broken == "state":
        (d / "trainer_state.json").write_text('{"global_step": ')
    return d


def accelerate_state(d: Path, broken: bool = False, model: str = "model.safetensors") -> Path:
    """An ``accelerator.save_state(d)`` folder: model, optimizer, scheduler, random states."""
    d.mkdir(parents=True, exist_ok=True)
    if model.endswith(".safetensors"):
        safetensors_file(d / model, {"unet.weight": 128})
    else:
        torch_file(d / model)
    torch_file(d / "optimizer.bin", {"state": {}, "param_groups": [{"lr": 1e-4}]})
    torch_file(d / "scheduler.bin", {"last_epoch": 3})
    torch_file(d / "random_states_0.pkl", {"step": 0, "random_state": (3, (1, 2), None), "torch_manual_seed": 1})
    if broken:
        truncate(d / "optimizer.bin")
    return d


def kohya_state(output_dir: Path, output_name: str, step: int, broken: bool = False) -> Path:
    d = accelerate_state(output_dir / f"{output_name}-step{step:08d}-state", broken=broken)
    (d / "train_state.json").write_text(json.dumps({"current_epoch": 1, "current_step": step}))
    return d


def lightning_ckpt(path: Path, step: int, epoch: int) -> Path:
    return torch_file(
        path,
        {
            "epoch": epoch,
            "global_step": step,
            "pytorch-lightning_version": "2.4.0",
            "state_dict": {"layer.weight": torch.ones(2, 2)},
            "loops": {},
            "callbacks": {},
            "optimizer_states": [{"state": {}, "param_groups": [{"lr": 0.1}]}],
        },
    )


def ultralytics_run(runs: Path, task: str, name: str, epoch: int, broken: bool = False) -> Path:
    weights = runs / task / name / "weights"
    ckpt = {"epoch": epoch, "best_fitness": 0.5, "model": None, "optimizer": {"state": {}}, "train_args": {}}
    last = torch_file(weights / "last.pt", ckpt)
    torch_file(weights / "best.pt", ckpt)
    if broken:
        truncate(last)
    return last


def nanochat_step(base_dir: Path, tag: str, step: int, ranks: int, broken: bool = False) -> Path:
    d = base_dir / "base_checkpoints" / tag
    model = torch_file(d / f"model_{step:06d}.pt", {"transformer.wte.weight": torch.ones(8, 4)})
    (d / f"meta_{step:06d}.json").write_text(json.dumps({"step": step, "model_config": {"n_layer": 20}}))
    for rank in range(ranks):
        torch_file(d / f"optim_{step:06d}_rank{rank}.pt", [{"state": {}}])
    if broken:
        truncate(model)
    return model
