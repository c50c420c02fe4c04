"""One module per training framework, each holding that framework's conventions: how to tell a job
uses it (`claims`, `files_say`), where its checkpoints are (`find`), how it resumes (`resume`).

Detection order matters: the command line and the script's imports are read first, most specific
first; the folders the job wrote to decide only when the source says nothing.
"""

from __future__ import annotations

import re
from typing import Dict, List

from debug_stuck.recovery.candidates import newest_first
from debug_stuck.recovery.frameworks import accelerate, hf_trainer, kohya, lightning, nanochat, pytorch, ultralytics
from debug_stuck.recovery.job import TrainingJob
from debug_stuck.recovery.model import Checkpoint
from debug_stuck.recovery.scan import walk

# A script that never imports torch: resumed by running its command again, no PyTorch conventions.
PLAIN_PYTHON = "python"
_TORCH_PACKAGES = r"(torch|lightning|pytorch_lightning|transformers|accelerate|deepspeed)"
TORCH_IMPORT = re.compile(
    r"^\s*(import\s+[\w., ]*\b" + _TORCH_PACKAGES + r"\b|from\s+" + _TORCH_PACKAGES + r"\b)", re.M
)

MODULES = (ultralytics, hf_trainer, lightning, accelerate, kohya, nanochat, pytorch)
BY_NAME: Dict[str, object] = {m.NAME: m for m in MODULES}
FRAMEWORKS = tuple(BY_NAME)

# (what decides) in order: the yolo console command, then the script's own imports
SOURCE_CHECKS = (
    (ultralytics.NAME, ultralytics.claims_command),
    (nanochat.NAME, nanochat.claims),
    (kohya.NAME, kohya.claims),
    (ultralytics.NAME, ultralytics.claims),
    (lightning.NAME, lightning.claims),
    (hf_trainer.NAME, hf_trainer.claims),
    (accelerate.NAME, accelerate.claims),
)
# Folder passes, in order; within a pass every folder is asked of each framework in turn (a kohya
# state folder is an accelerate state folder too, so kohya asks first).
FILE_PASSES = ((hf_trainer,), (ultralytics, kohya, accelerate), (lightning,))


def detect(job: TrainingJob) -> str:
    """The framework a job uses; "pytorch" when nothing more specific is found."""
    for name, claims in SOURCE_CHECKS:
        if claims(job):
            return name
    # shallow: the job's own output folders and their checkpoint folders, not whatever lies deeper
    # below a working directory such as /tmp or $HOME
    dirs = walk(job.output_dirs(), max_depth=2).dirs()
    for frameworks in FILE_PASSES:
        for entry in dirs:
            for module in frameworks:
                if module.files_say(entry):
                    return module.NAME
    if job.launch.launcher == "python" and job.source and not TORCH_IMPORT.search(job.source):
        return PLAIN_PYTHON  # its source is readable and never imports torch: not a PyTorch job
    return pytorch.NAME


def module_for(framework: str):
    return BY_NAME.get(framework, pytorch)


def find(job: TrainingJob, framework: str) -> List[Checkpoint]:
    """The framework's checkpoints for this job, furthest in training first (the highest step; see
    `debug_stuck.recovery.candidates`), each checked (`valid`, `problem`)."""
    module = module_for(framework)
    return newest_first(module.find(job), epochs=getattr(module, "RANK_BY_EPOCH", True))
