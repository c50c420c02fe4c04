"""nanochat: model_NNNNNN.pt + meta + per-rank optimizer shards under NANOCHAT_BASE_DIR; `--resume-from-step N`."""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Tuple

from debug_stuck.recovery import checkpoints as ck
from debug_stuck.recovery.candidates import checked, newest_paths
from debug_stuck.recovery.commandline import set_option
from debug_stuck.recovery.job import TrainingJob
from debug_stuck.recovery.model import Checkpoint, ResumePlan
from debug_stuck.recovery.reading import at, bounded_read, home_dir, mtime_of
from debug_stuck.recovery.source import imports, resume_flag

NAME = "nanochat"


NANOCHAT_CHECKPOINT_DIRS = {
    "base_train": "base_checkpoints",
    "mid_train": "mid_checkpoints",
    "chat_sft": "chatsft_checkpoints",
    "chat_rl": "chatrl_checkpoints",
}


def _is_dir(path: str) -> bool:
    return bool(bounded_read(lambda: os.path.isdir(at(path)), f"stat {path}", False))


def claims(job: TrainingJob) -> bool:
    module = job.launch.module or ""
    return (
        imports(job.source, "nanochat")
        or (
            module.startswith("scripts.")
            and job.cwd is not None
            and os.path.isdir(at(os.path.join(job.cwd, "nanochat")))
        )
        or (module.startswith("scripts.") and module.rsplit(".", 1)[-1] in NANOCHAT_CHECKPOINT_DIRS)
    )


def nanochat_base_dir(env: Dict[str, str]) -> str:
    return env.get("NANOCHAT_BASE_DIR") or os.path.join(home_dir(env), ".cache", "nanochat")


def _nanochat_dir(job: TrainingJob) -> Tuple[str, List[str]]:
    """(the checkpoints folder of this script, the model-tag folders to look in)."""
    script = (job.launch.module or job.launch.script_name or "base_train").rsplit(".", 1)[-1]
    script = script[:-3] if script.endswith(".py") else script
    sub = NANOCHAT_CHECKPOINT_DIRS.get(script, "base_checkpoints")
    root = os.path.join(nanochat_base_dir(job.env), sub)
    tag = job.opt("--model-tag", "--model_tag")
    depth = job.opt("--depth")
    if not tag and depth and depth.isdigit():
        tag = f"d{depth}"
    names = bounded_read(lambda: sorted(os.listdir(at(root))), f"listing {root}", []) or []
    if tag and tag in names:
        return root, [os.path.join(root, tag)]
    if not tag and "d20" in names and not depth:
        pass  # nanochat's default depth is 20, but a speedrun sets its own: look at every tag
    return root, [os.path.join(root, n) for n in names if re.match(r"^d\d+", n) or n == tag]


def find(job: TrainingJob) -> List[Checkpoint]:
    _, dirs = _nanochat_dir(job)
    out = []
    for d in dirs:
        names = bounded_read(lambda d=d: sorted(os.listdir(at(d))), f"listing {d}", []) or []
        models = [(os.path.join(d, n), mtime_of(os.path.join(d, n))) for n in names if re.match(r"^model_\d+\.pt", n)]
        for path in newest_paths(models, lambda p: int(re.match(r"^model_(\d+)", os.path.basename(p)).group(1))):
            m = re.match(r"^model_(\d+)\.pt$", os.path.basename(path))
            step = int(m.group(1)) if m else None
            out.append(checked(path, "nanochat", lambda p=path, s=step, n=names: _check_nanochat(job, p, s, n), step))
    return out


def _check_nanochat(job: TrainingJob, model: str, step: Optional[int], names: List[str]) -> ck.FileCheck:
    result = ck.check_file(model)
    if not result.ok or step is None:
        return result
    folder = os.path.dirname(model)
    meta = f"meta_{step:06d}.json"
    if meta not in names:
        result.problem = f"{meta} is missing (the save did not finish)"
        return result
    _, problem = ck.check_json(os.path.join(folder, meta))
    if problem:
        result.problem = f"{meta}: {problem}"
        return result
    shards = [n for n in names if n.startswith(f"optim_{step:06d}_rank") and n.endswith(".pt")]
    if not shards:
        result.problem = f"no optimizer state (optim_{step:06d}_rank*.pt): the resume needs it"
        return result
    expected = job.launch.nproc
    if expected and len(shards) < expected:
        result.problem = f"optimizer shards missing: {len(shards)} of {expected} (optim_{step:06d}_rank*.pt)"
        return result
    for shard in shards:
        problem = ck.check_file(os.path.join(folder, shard)).problem
        if problem:
            result.problem = f"{shard}: {problem}"
            return result
    return result


def resume(job: TrainingJob, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    root, dirs = _nanochat_dir(job)
    if "NANOCHAT_BASE_DIR" in job.env:
        plan.env["NANOCHAT_BASE_DIR"] = job.env["NANOCHAT_BASE_DIR"]
    if cp is None:
        where = ", ".join(dirs) if dirs else root
        plan.notes.append(f"no model_NNNNNN.pt in {where}: base_train saves every --save-every steps")
        return list(job.cmdline)
    own = resume_flag(job.source)
    flag = own.flag if own is not None and "step" in own.flag else "--resume-from-step"
    if job.launch.nproc:
        plan.notes.append(
            f"resume with the same --nproc_per_node={job.launch.nproc}: the optimizer state is sharded per rank"
        )
    tag = os.path.basename(os.path.dirname(cp.path))
    argv = list(job.cmdline)
    if not job.opt("--model-tag", "--model_tag") and not job.opt("--depth") and tag != "d20":
        plan.notes.append(f"the checkpoint is under {tag}: give the same --depth (or --model-tag {tag})")
    return set_option(argv, flag, str(cp.step), aliases=("--resume_from_step",))
