"""kohya sd-scripts: NAME-stepN-state / NAME-NNNNNN-state folders (--save_state); resume with `--resume <dir>`."""

from __future__ import annotations

import os
import re
import shlex
from typing import List, Optional, Tuple

from debug_stuck.recovery import checkpoints as ck
from debug_stuck.recovery.candidates import checked, newest_paths
from debug_stuck.recovery.commandline import set_option
from debug_stuck.recovery.job import TrainingJob
from debug_stuck.recovery.model import Checkpoint, ResumePlan
from debug_stuck.recovery.reading import at, bounded_read, mtime_of
from debug_stuck.recovery.scan import Entry, walk

NAME = "kohya"


KOHYA_SCRIPT = re.compile(
    r"^(train_network|sdxl_train\w*|flux_train\w*|sd3_train\w*|lumina_train\w*|train_db|fine_tune|"
    r"train_textual_inversion\w*|train_control\w*|sdxl_train_control\w*|hunyuan\w*train\w*)\.py$"
)
KOHYA_STEP = re.compile(r"-step(\d+)-state$")
KOHYA_EPOCH = re.compile(r"-(\d{6})-state$")
KOHYA_IMPORT = re.compile(r"^\s*(from\s+library\b|import\s+library\.)", re.M)


def claims(job: TrainingJob) -> bool:
    # a script name alone (fine_tune.py, train_network.py) decides only when the source cannot be read
    name = job.launch.script_name or ""
    return bool(KOHYA_IMPORT.search(job.source)) or (not job.source and bool(KOHYA_SCRIPT.match(name)))


def files_say(entry: Entry) -> bool:
    return os.path.basename(entry.path).endswith("-state") and ck.is_accelerate_state(entry.names)


def _kohya_output(job: TrainingJob) -> Tuple[Optional[str], Optional[str]]:
    output_dir = job.opt("--output_dir")
    return (job.path(output_dir) if output_dir else None), job.opt("--output_name")


def find(job: TrainingJob) -> List[Checkpoint]:
    output_dir, output_name = _kohya_output(job)
    if output_dir:
        scan = walk([output_dir], max_depth=1)
        job.notes.extend(scan.notes)
    else:
        scan = job.scan()
    dirs = [e for e in scan.dirs() if e.path.rstrip("/").endswith("-state")]
    if output_name:
        mine = [e for e in dirs if os.path.basename(e.path).startswith(f"{output_name}-")]
        dirs = mine or dirs
    out = []
    for path in newest_paths([(e.path, e.mtime) for e in dirs]):
        name = os.path.basename(path)
        step = KOHYA_STEP.search(name)
        epoch = KOHYA_EPOCH.search(name)
        out.append(
            checked(
                path,
                "kohya-state",
                lambda p=path: ck.check_state_dir(p),
                int(step.group(1)) if step else None,
                int(epoch.group(1)) if epoch else None,
            )
        )
    return out


def resume(job: TrainingJob, plan: ResumePlan) -> List[str]:
    cp = plan.checkpoint
    if not job.flag("--save_state"):
        plan.notes.append(
            "the job runs without --save_state: kohya writes no training state; add --save_state "
            "(and --save_state_on_train_end) so the next run can resume with its optimizer"
        )
    if cp is not None:
        return set_option(job.cmdline, "--resume", cp.path)
    output_dir, output_name = _kohya_output(job)
    name = job.launch.script_name or ""
    if output_dir and "network" in name:
        weights = _newest_lora(output_dir, output_name)
        if weights:
            plan.notes.append(
                f"no state to resume; to continue from the newest LoRA weights instead (optimizer and step count "
                f"start over): add --network_weights {shlex.quote(weights)}"
            )
    return list(job.cmdline)


def _newest_lora(output_dir: str, output_name: Optional[str]) -> Optional[str]:
    names = bounded_read(lambda: os.listdir(at(output_dir)), f"listing {output_dir}", []) or []
    candidates = [
        os.path.join(output_dir, n)
        for n in names
        if n.endswith(".safetensors") and (not output_name or n.startswith(output_name))
    ]
    for path in sorted(candidates, key=mtime_of, reverse=True):
        if ck.check_file(path).ok:
            return path
    return None
