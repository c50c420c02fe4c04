"""`debug-stuck resume`: checkpoint checks and resume plans on real checkpoint layouts, and on real jobs.

Every layout is written the way its framework writes it (real torch.save zips, safetensors by the
spec), with a broken newest checkpoint where it matters: the plan must skip it and name it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from zoo.fixtures import zoo  # noqa: F401

torch = pytest.importorskip("torch")

import ckpt_layouts as L  # noqa: E402

from conftest import REPO, parse_cli  # noqa: E402
from debug_stuck.errors import BadInput, NotInspectable  # noqa: E402
from debug_stuck.frontends.commands.resume import run as run_resume  # noqa: E402
from debug_stuck.recovery import checkpoints as ck  # noqa: E402
from debug_stuck.recovery.commandline import parse_launch  # noqa: E402
from debug_stuck.recovery.plan import (  # noqa: E402
    NO_CHECKPOINT,
    detect_framework,
    find_checkpoints,
    plan_resume,
    plan_resume_for_pid,
)

# -- format checks ---------------------------------------------------------------------------------


def test_torch_checkpoints_valid_truncated_legacy_and_odd_files(tmp_path):
    good = L.torch_file(tmp_path / "good.pt", {"global_step": 1200, "model": {"w": torch.ones(3)}})
    result = ck.check_file(str(good), ("global_step",))
    assert result.ok and result.fmt == "torch-zip" and result.values == {"global_step": 1200}

    assert ck.check_file(str(L.torch_file(tmp_path / "legacy.pt", legacy=True))).fmt == "torch-legacy"

    cut = L.truncate(L.torch_file(tmp_path / "cut.pt"))
    assert ck.check_file(str(cut)).problem == "truncated: zip central directory missing"

    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    assert "empty file" in ck.check_file(str(empty)).problem

    reserved = tmp_path / "reserved.pt"  # space allocated, never written (a save that hung at once)
    reserved.write_bytes(b"\0" * 4096)
    assert "zero bytes" in ck.check_file(str(reserved)).problem

    fifo = tmp_path / "fifo.pt"  # opening it would block for ever: it must not be opened
    os.mkfifo(fifo)
    started = time.monotonic()
    assert ck.check_file(str(fifo)).problem == "not a regular file (a FIFO)"
    assert time.monotonic() - started < 1.0

    assert ck.is_partial_name("ckpt.pt.tmp") and ck.is_partial_name("tmp-checkpoint-500")
    assert ck.is_partial_name("model.safetensors.partial") and not ck.is_partial_name("temperature_model.pt")


def test_safetensors_header_and_size_checks(tmp_path):
    good = L.safetensors_file(tmp_path / "lora.safetensors")
    assert ck.check_file(str(good)).ok

    cut = L.truncate(L.safetensors_file(tmp_path / "cut.safetensors"), keep=0.9)
    assert ck.check_file(str(cut)).problem.startswith("truncated: safetensors data ends at byte")

    header_cut = L.truncate(L.safetensors_file(tmp_path / "header.safetensors"), keep=0.1)
    assert ck.check_file(str(header_cut)).problem.startswith("truncated: the header needs")

    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes((20).to_bytes(8, "little") + b"{not json at all!!!}" + b"\0" * 8)
    assert ck.check_file(str(garbage)).problem == "corrupt: the safetensors header is not valid JSON"

    wrong = tmp_path / "wrong.safetensors"  # offsets disagree with shape x dtype
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}).encode()
    wrong.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
    assert "shape and dtype need 16" in ck.check_file(str(wrong)).problem


# -- launcher and framework detection --------------------------------------------------------------

HF_SCRIPT = """\
from transformers import HfArgumentParser, Trainer, TrainingArguments
parser = HfArgumentParser((TrainingArguments,))
(training_args,) = parser.parse_args_into_dataclasses()
trainer = Trainer(model=None, args=training_args)
trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
"""

ACCELERATE_SCRIPT = """\
import argparse
from accelerate import Accelerator
from accelerate.utils import ProjectConfiguration
parser = argparse.ArgumentParser()
parser.add_argument("--output_dir", default="out")
parser.add_argument(
    "--resume_from_checkpoint", type=str, default=None, help="a folder written by save_state"
)
args = parser.parse_args()
config = ProjectConfiguration(project_dir=args.output_dir, automatic_checkpoint_naming=True)
accelerator = Accelerator(project_config=config)
if args.resume_from_checkpoint:
    accelerator.load_state(args.resume_from_checkpoint)
accelerator.save_state()
"""

LIGHTNING = """\
import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
trainer = L.Trainer(callbacks=[ModelCheckpoint(save_last=True)])
trainer.fit(model)
"""

# a pre-tokenizing job (the fifth hunt's `datasets.map(num_proc=2)`): transformers for its fast
# tokenizer, tokenizers' BpeTrainer to train the vocabulary, no Trainer
TOKENIZE_SCRIPT = """\
import datasets, torch
from tokenizers import Tokenizer, models, trainers
from transformers import PreTrainedTokenizerFast
tk = Tokenizer(models.BPE(unk_token="[UNK]"))
tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=4000))
tok = PreTrainedTokenizerFast(tokenizer_object=tk)
"""

GENERIC_SCRIPT = """\
import argparse, torch
p = argparse.ArgumentParser()
p.add_argument("--save_dir", default="ckpts")
p.add_argument("-r", "--resume", type=str, default="", help="checkpoint to resume from")
args = p.parse_args()
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "command, files, expected",
    [
        ("torchrun --nproc_per_node=8 -m scripts.base_train", {"nanochat/__init__.py": ""}, ("nanochat", "torchrun")),
        ("accelerate launch train.py --output_dir out", {"train.py": HF_SCRIPT}, ("hf-trainer", "accelerate")),
        ("accelerate launch train.py --output_dir out", {"train.py": ACCELERATE_SCRIPT}, ("accelerate", "accelerate")),
        ("yolo train model=yolov8n.pt data=coco8.yaml", {}, ("ultralytics", "python")),
        ("python flux_train_network.py --save_state --output_dir out --output_name lora", {}, ("kohya", "python")),
        ("python -m torch.distributed.run --nproc_per_node 2 t.py", {"t.py": LIGHTNING}, ("lightning", "torchrun")),
        ("deepspeed --num_gpus 8 train.py --deepspeed ds.json", {"train.py": GENERIC_SCRIPT}, ("pytorch", "deepspeed")),
        ("/usr/bin/python3 -u train.py --save_dir ckpts", {"train.py": GENERIC_SCRIPT}, ("pytorch", "python")),
        ("python fine_tune.py --output_dir out", {"fine_tune.py": HF_SCRIPT}, ("hf-trainer", "python")),
        ("python prep_and_train.py", {"prep_and_train.py": TOKENIZE_SCRIPT}, ("pytorch", "python")),
    ],
)  # fmt: skip
def test_detects_launcher_and_framework(tmp_path, command, files, expected):
    for name, text in files.items():
        _write(tmp_path / name, text)
    assert detect_framework(shlex.split(command), {}, str(tmp_path)) == expected


def test_parse_launch_finds_script_module_and_world_size():
    launch = parse_launch(["/usr/bin/python3", "/usr/local/bin/torchrun", "--standalone", "--nproc_per_node", "4",
                           "-m", "scripts.base_train", "--", "--depth=26"])  # fmt: skip
    assert (launch.launcher, launch.module, launch.nproc) == ("torchrun", "scripts.base_train", 4)
    assert launch.program_args == ["--", "--depth=26"]
    launch = parse_launch(shlex.split("accelerate launch --multi_gpu --num_processes 2 train.py --lr 1e-4"))
    assert (launch.launcher, launch.script, launch.nproc, launch.program_args) == (
        "accelerate",
        "train.py",
        2,
        ["--lr", "1e-4"],
    )


# -- resume plans per framework --------------------------------------------------------------------


def test_nanochat_skips_the_truncated_newest_step(tmp_path):
    base = tmp_path / "nanochat-base"
    work = tmp_path / "nanochat"
    _write(work / "nanochat" / "__init__.py", "")
    _write(work / "scripts" / "base_train.py", 'parser.add_argument("--resume-from-step", type=int, default=-1)\n')
    older = L.nanochat_step(base, "d20", 500, ranks=8)
    partial_shards = L.nanochat_step(base, "d20", 750, ranks=3)  # 3 of 8 optimizer shards
    newest = L.nanochat_step(base, "d20", 1000, ranks=8, broken=True)
    L.age([older.parent])
    L.age([partial_shards, newest], start=time.time() - 60)
    env = {"NANOCHAT_BASE_DIR": str(base), "HOME": str(tmp_path)}
    cmd = "torchrun --standalone --nproc_per_node=8 -m scripts.base_train"

    plan = plan_resume(shlex.split(cmd), str(work), env)

    assert (plan.framework, plan.launcher) == ("nanochat", "torchrun")
    assert plan.checkpoint.path == str(older) and plan.checkpoint.step == 500
    assert [c.path for c in plan.skipped] == [str(newest), str(partial_shards)]
    assert plan.skipped[0].problem == "truncated: zip central directory missing"
    assert plan.skipped[1].problem.startswith("optimizer shards missing: 3 of 8")
    assert plan.command == f"NANOCHAT_BASE_DIR={base} {cmd} --resume-from-step 500"
    assert plan.lost == "steps after 500"
    data = plan.to_dict()
    assert {"framework", "checkpoint", "command", "launcher", "skipped", "notes", "lost"} <= set(data)
    assert data["skipped"][0]["path"] == str(newest)


def test_hf_trainer_resumes_with_the_scripts_flag_and_names_the_broken_checkpoint(tmp_path):
    _write(tmp_path / "train.py", HF_SCRIPT)
    out = tmp_path / "out"
    good = L.hf_checkpoint(out, 500)
    broken = L.hf_checkpoint(out, 1000, broken="optimizer")
    staging = L.hf_checkpoint(out, 1500)
    staging = staging.rename(out / "tmp-checkpoint-1500")  # the Trainer's staging name, never renamed
    L.age([good, broken, staging])
    cmd = ["accelerate", "launch", "train.py", "--output_dir", "out"]

    plan = plan_resume(cmd, str(tmp_path), {})

    assert plan.framework == "hf-trainer" and plan.launcher == "accelerate"
    assert plan.checkpoint.path == str(good) and plan.checkpoint.kind == "hf-dir" and plan.checkpoint.step == 500
    assert [c.path for c in plan.skipped] == [str(staging), str(broken)]
    assert plan.skipped[0].problem.startswith("temporary name")
    assert plan.skipped[1].problem == "optimizer.pt: truncated: zip central directory missing"
    assert plan.argv == cmd + ["--resume_from_checkpoint", str(good)]
    assert any("would pick" in n and str(broken) in n for n in plan.notes)
    assert plan.lost == "steps after 500"


def test_hf_trainer_without_resume_argument_says_what_to_change(tmp_path):
    _write(tmp_path / "train.py", HF_SCRIPT.replace("resume_from_checkpoint=training_args.resume_from_checkpoint", ""))
    good = L.hf_checkpoint(tmp_path / "out", 200)
    plan = plan_resume(["python", "train.py", "--output_dir", "out"], str(tmp_path), {})
    assert plan.checkpoint.path == str(good)
    assert plan.argv == ["python", "train.py", "--output_dir", "out"]
    assert any(f'trainer.train(resume_from_checkpoint="{good}")' in n for n in plan.notes)


def test_accelerate_state_dirs(tmp_path):
    _write(tmp_path / "train.py", ACCELERATE_SCRIPT)
    ckpts = tmp_path / "out" / "checkpoints"
    first = L.accelerate_state(ckpts / "checkpoint_0")
    second = L.accelerate_state(ckpts / "checkpoint_1", broken=True)
    L.age([first, second])
    plan = plan_resume(["accelerate", "launch", "train.py", "--output_dir", "out"], str(tmp_path), {})
    assert (plan.framework, plan.checkpoint.path, plan.checkpoint.kind) == ("accelerate", str(first), "accelerate-dir")
    assert plan.skipped[0].path == str(second)
    assert plan.skipped[0].problem == "optimizer.bin: truncated: zip central directory missing"
    assert plan.argv[-2:] == ["--resume_from_checkpoint", str(first)]
    assert any("iteration" in n for n in plan.notes)  # automatic naming would overwrite checkpoint_1


def test_ultralytics_cli_resumes_from_the_newest_valid_last_pt(tmp_path):
    runs = tmp_path / "runs"
    good = L.ultralytics_run(runs, "detect", "train", epoch=5)
    broken = L.ultralytics_run(runs, "detect", "train2", epoch=1, broken=True)
    L.age([good.parent.parent, broken.parent.parent])
    plan = plan_resume(shlex.split("yolo train model=yolov8n.pt data=coco8.yaml epochs=10"), str(tmp_path), {})
    assert plan.framework == "ultralytics" and plan.checkpoint.path == str(good)
    assert plan.command == f"yolo train resume model={good}"
    assert plan.skipped[0].path == str(broken) and plan.skipped[0].problem.startswith("truncated")
    assert plan.lost == "progress after epoch 5"


def test_kohya_resumes_from_the_newest_valid_state(tmp_path):
    out = tmp_path / "out"
    good = L.kohya_state(out, "lora", 100)
    broken = L.kohya_state(out, "lora", 200, broken=True)
    L.age([good, broken])
    cmd = shlex.split("python flux_train_network.py --save_state --output_dir out --output_name lora")
    plan = plan_resume(cmd, str(tmp_path), {})
    assert plan.framework == "kohya" and plan.checkpoint.kind == "kohya-state"
    assert plan.checkpoint.path == str(good) and plan.checkpoint.step == 100
    assert plan.skipped[0].path == str(broken)
    assert plan.argv == cmd + ["--resume", str(good)]
    assert plan.lost == "steps after 100"


def test_kohya_options_from_its_toml_config_file(tmp_path):
    _write(tmp_path / "cfg.toml", '[training]\noutput_dir = "results"\noutput_name = "sdxl"\nsave_state = true\n')
    good = L.kohya_state(tmp_path / "results", "sdxl", 40)
    L.kohya_state(tmp_path / "results", "other", 80)  # another run's state in the same folder
    cmd = ["accelerate", "launch", "sdxl_train_network.py", "--config_file", "cfg.toml"]
    plan = plan_resume(cmd, str(tmp_path), {})
    assert plan.framework == "kohya" and plan.checkpoint.path == str(good)
    assert plan.argv == cmd + ["--resume", str(good)]
    assert not any("--save_state" in n for n in plan.notes)


def test_kohya_without_save_state_offers_the_lora_weights(tmp_path):
    out = tmp_path / "out"
    lora = L.safetensors_file(out / "lora-000002.safetensors")
    cmd = shlex.split("accelerate launch sdxl_train_network.py --output_dir out --output_name lora")
    plan = plan_resume(cmd, str(tmp_path), {})
    assert plan.checkpoint is None and plan.lost == NO_CHECKPOINT
    assert plan.argv == cmd
    assert any("--save_state" in n for n in plan.notes)
    assert any(f"--network_weights {lora}" in n for n in plan.notes)


def test_lightning_skips_a_broken_last_ckpt(tmp_path):
    _write(tmp_path / "train.py", LIGHTNING)
    ckpts = tmp_path / "lightning_logs" / "version_0" / "checkpoints"
    good = L.lightning_ckpt(ckpts / "epoch=1-step=200.ckpt", step=200, epoch=1)
    last = L.truncate(L.lightning_ckpt(ckpts / "last.ckpt", step=300, epoch=2))
    L.age([good, last])
    plan = plan_resume(["python", "train.py"], str(tmp_path), {})
    assert plan.framework == "lightning" and plan.checkpoint.path == str(good)
    assert (plan.checkpoint.step, plan.checkpoint.epoch) == (200, 1)
    assert plan.skipped[0].path == str(last)
    assert any('ckpt_path="last" would load the broken last.ckpt' in n for n in plan.notes)
    assert any(f'ckpt_path="{good}"' in n for n in plan.notes)


def test_lightning_last_ckpt_step_is_read_without_unpickling(tmp_path):
    _write(tmp_path / "train.py", LIGHTNING)
    last = L.lightning_ckpt(tmp_path / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt", 300, 2)
    (found,) = find_checkpoints("lightning", ["python", "train.py"], str(tmp_path), {})
    assert (found.path, found.valid, found.step, found.epoch) == (str(last), True, 300, 2)


def test_generic_script_with_a_resume_flag_and_a_half_written_tmp(tmp_path):
    _write(tmp_path / "train.py", GENERIC_SCRIPT)
    good = L.torch_file(tmp_path / "ckpts" / "model.pt", {"step": 3000, "model": {"w": torch.ones(2)}})
    older = L.torch_file(tmp_path / "ckpts" / "model_old.pt", {"step": 1000})
    tmp = L.torch_file(tmp_path / "ckpts" / "model.pt.tmp", {"step": 4000})
    L.age([older, good, tmp])
    cmd = ["python", "train.py", "--save_dir", "ckpts"]
    plan = plan_resume(cmd, str(tmp_path), {})
    assert (plan.framework, plan.launcher) == ("pytorch", "python")
    assert plan.checkpoint.path == str(good) and plan.checkpoint.step == 3000
    assert plan.skipped[0].path == str(tmp) and plan.skipped[0].problem.startswith("temporary name")
    assert plan.argv == cmd + ["--resume", str(good)]


def test_a_data_shard_saved_with_torch_save_is_no_checkpoint_to_resume_from(tmp_path):
    """The seventh hunt's h_poll: the job reads shards that an ingest service torch.save()s into its
    drop folder; the newest shard was offered as the checkpoint. One tensor at the top of the pickle
    is data; a state dict, a dict of states, a whole module are checkpoints."""
    _write(tmp_path / "train.py", "import torch\nprint('training')\n")
    good = L.torch_file(tmp_path / "ckpts" / "model.pt", {"step": 300, "model": {"w": torch.ones(2)}})
    shards = tmp_path / "shards"
    shards.mkdir()
    torch.save(torch.randn(64, 32), shards / "s7.pt")
    L.age([good, shards / "s7.pt"])
    plan = plan_resume(["python", "train.py"], str(tmp_path), {})
    assert plan.checkpoint is not None and plan.checkpoint.path == str(good), plan.to_dict()
    assert ck.check_file(str(shards / "s7.pt")).problem.startswith("not a training checkpoint: it holds one tensor")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")
    torch.save(torch.nn.Linear(2, 2).state_dict(), tmp_path / "state.pt")
    assert ck.check_file(str(tmp_path / "module.pt")).ok and ck.check_file(str(tmp_path / "state.pt")).ok


def test_generic_script_without_flag_and_without_checkpoint(tmp_path):
    _write(tmp_path / "train.py", "import torch\nprint('training')\n")
    cmd = ["torchrun", "--nproc_per_node=2", "train.py", "--epochs", "3"]
    plan = plan_resume(cmd, str(tmp_path), {})
    assert plan.checkpoint is None and plan.lost == NO_CHECKPOINT
    assert plan.argv == cmd and plan.command == shlex.join(cmd)

    broken = L.truncate(L.torch_file(tmp_path / "last.pt"))
    plan = plan_resume(cmd, str(tmp_path), {})
    assert plan.checkpoint is None and plan.lost == NO_CHECKPOINT
    assert plan.skipped[0].path == str(broken)

    good = L.torch_file(tmp_path / "ok.pt")
    L.age([good, broken])
    plan = plan_resume(cmd, str(tmp_path), {})
    assert plan.checkpoint.path == str(good) and plan.argv == cmd
    assert any("must load" in n and str(good) in n for n in plan.notes)


def test_secrets_in_the_command_are_redacted_in_the_text_but_not_in_argv(tmp_path):
    cmd = ["python", "train.py", "--hub_token", "hf_abcdefghijklmnopqrstuvwxyz", "--api-key=s3cret", "--lr", "1"]
    plan = plan_resume(cmd, str(tmp_path), {})
    assert plan.argv == cmd
    assert plan.command == "python train.py --hub_token '<redacted>' '--api-key=<redacted>' --lr 1"
    assert "s3cret" not in json.dumps(plan.to_dict()) and "hf_abc" not in json.dumps(plan.to_dict())


# -- the command -----------------------------------------------------------------------------------


def _resume_args(*argv):
    return parse_cli("resume", *argv)


def test_resume_cli_text_and_json_for_an_ended_job(tmp_path, capsys):
    out = tmp_path / "out"
    good = L.kohya_state(out, "lora", 100)
    broken = L.kohya_state(out, "lora", 200, broken=True)
    L.age([good, broken])
    cmd = "python flux_train_network.py --save_state --output_dir out --output_name lora"
    assert run_resume(_resume_args("--cmd", cmd, "--dir", str(tmp_path))) == 0
    text = capsys.readouterr().out
    assert f"skipped: {broken}: optimizer.bin: truncated" in text
    assert text.rstrip().splitlines()[-1] == f"cd {tmp_path} && {cmd} --resume {good}"

    assert run_resume(_resume_args("--cmd", cmd, "--dir", str(tmp_path), "--format", "json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["checkpoint"] == str(good) and data["framework"] == "kohya"

    with pytest.raises(BadInput):
        run_resume(_resume_args("--cmd", "python 'unterminated", "--dir", str(tmp_path)))
    with pytest.raises(BadInput):
        run_resume(_resume_args())
    with pytest.raises(NotInspectable):
        run_resume(_resume_args("--pid", str(2**22 + 12345)))


# -- real jobs -------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_resume_pid_on_a_job_hung_saving_to_a_fifo(zoo, capsys):  # noqa: F811
    """torch_save_blocked: ckpt.pt is a FIFO the save blocks on. Never opened; no usable checkpoint."""
    job = zoo("torch_save_blocked")
    cmdline = psutil_cmdline(job.proc.pid)
    started = time.monotonic()
    plan = plan_resume_for_pid(job.proc.pid)
    assert time.monotonic() - started < 10
    assert (plan.framework, plan.launcher) == ("pytorch", "python")
    assert plan.checkpoint is None and plan.lost == NO_CHECKPOINT
    assert plan.skipped[0].path == str(job.workdir / "ckpt.pt")
    assert plan.skipped[0].problem == "not a regular file (a FIFO)"
    assert plan.argv == cmdline and plan.cwd == str(job.workdir)

    assert run_resume(_resume_args("--pid", str(job.proc.pid), "--format", "json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["checkpoint"] is None and data["lost"] == NO_CHECKPOINT


@pytest.mark.timeout(90)
def test_resume_pid_from_a_dataloader_worker_of_a_healthy_job(zoo):  # noqa: F811
    """The healthy job saves ckpt.pt every 20 steps (tmp + rename); any PID of it gives the plan."""
    job = zoo("healthy")
    deadline = time.monotonic() + 30
    while not (job.workdir / "ckpt.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = job.children_of(job.proc.pid)
    assert workers, job.pids()
    plan = plan_resume_for_pid(workers[0].pid)  # a worker: the plan is for its trainer
    assert plan.argv == psutil_cmdline(job.proc.pid)
    assert plan.checkpoint is not None and plan.checkpoint.path == str(job.workdir / "ckpt.pt")
    assert plan.checkpoint.valid and plan.checkpoint.step is not None and plan.checkpoint.step % 20 == 0
    assert plan.lost == f"steps after {plan.checkpoint.step}"


def psutil_cmdline(pid: int):
    import psutil

    return psutil.Process(pid).cmdline()


def test_resume_module_runs_standalone(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "debug_stuck",
            "resume",
            "--cmd",
            "python train.py",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "no usable checkpoint" in proc.stdout
