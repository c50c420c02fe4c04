"""Which fixes apply to this job: each fix declares its framework, launcher, platform, backend, OS
or the option of the job's command it sets (playbook frontmatter `fixes:`); the job's context says
which hold. A fix for another framework is left out; one whose context is not known is kept last
with its condition ("if you use kohya"); a flag is suggested only for a command that has it."""

from __future__ import annotations

from typing import AbstractSet, Dict, List, Optional, Tuple

from debug_stuck.recovery.commandline import has_option

FRAMEWORK_NAMES = {
    "kohya": "sd-scripts (kohya)",
    "hf-trainer": "the Hugging Face Trainer",
    "python": "plain Python",
    "stopped": "a stopped reader",
    "running": "a reader that runs",
    "std": "a write to stdout or stderr",
    "captured": "output its own parent captures (subprocess.PIPE)",
    "debugger": "a process stopped in the debugger (pdb)",
    "regex": "a thread busy in a regular expression",
    "elsewhere": "no stack in the debugger",
    "lock": "a wait for a lock another thread holds",
    "other": "a wait that ends elsewhere (see the chain)",
    "launch": "a job whose stdin is the one its launch command is given",
    "piped-inside": "a stdin piped inside the launch command",
    "slurm": "Slurm",
    "ray": "Ray",
    "none": "no scheduler in its environment (no SLURM_JOB_ID, no RAY_ADDRESS)",
}

APPLIES, CONDITIONAL, NOT_HERE = "applies", "conditional", "not-here"
# How a fix whose context is not known reads ("on cuda", "if you use kohya").
CONDITION_WORDS = {
    "framework": "if you use {names}",
    "launcher": "if you use {names}",
    "reader": "for {names}",
    "stream": "for {names}",
    "stopped_in": "for {names}",
    "busy_in": "for {names}",
    "wait": "for {names}",
    "scheduler": "if you use {names}",
}
# Fixes about what the job is seen to do: first among the fixes that apply.
SPECIFIC_KEYS = frozenset({"uses", "stopped_in", "busy_in"})
# What a context key is taken to be when nothing says: the tool's jobs train with torch.
PRESUMED = {"stack": "torch", "stdin": "launch"}


def _either(names: List[str]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def judge(
    applies: Dict[str, List[str]],
    flag: Optional[str],
    context: Dict[str, str],
    argv: List[str],
    uses: AbstractSet[str] = frozenset(),
):
    """(APPLIES | CONDITIONAL | NOT_HERE, the condition or the reason). `uses`: every framework the
    job is seen to use (its imports, its frames, its launcher), beside the one its checkpoints
    follow (context["framework"]): a job that calls accelerate's gather is an accelerate job
    whatever its checkpoints look like. The libraries it is seen to use are in `uses` too (a fix
    `uses: [wandb]`); one not seen leaves the fix conditional, never out: absence proves nothing."""
    conditions = []
    for key, wanted in applies.items():
        if key in ("framework", "uses") and uses.intersection(wanted):
            continue
        if key == "uses":
            conditions.append(f"if your job uses {_either(wanted)}")
            continue
        have = context.get(key)
        names = _either([FRAMEWORK_NAMES.get(v, v) for v in wanted])
        if have is None and key in PRESUMED:
            if PRESUMED[key] not in wanted:
                return NOT_HERE, f"for {names}; this job's library is not known ({PRESUMED[key]} presumed)"
            continue
        if have is None:
            conditions.append(CONDITION_WORDS.get(key, "on {names}").format(names=names))
        elif have not in wanted:
            return NOT_HERE, f"for {names}; this job: {FRAMEWORK_NAMES.get(have, have)}"
    if flag:
        if not argv:
            conditions.append(f"if your command takes {flag}")
        elif not _has_flag(argv, flag):
            return NOT_HERE, f"sets {flag}, which this job's command does not take"
    if conditions:
        return CONDITIONAL, "; ".join(conditions)
    return APPLIES, None


def _has_flag(argv: List[str], flag: str) -> bool:
    return (
        has_option(argv, flag) or has_option(argv, flag.replace("-", "_")) or has_option(argv, flag.replace("_", "-"))
    )


def job_flag_spelling(argv: List[str], flag: str) -> Optional[str]:
    """How the job's own command spells the flag (--num_workers for --num-workers), if it has it."""
    variants = {flag.lstrip("-"), flag.lstrip("-").replace("-", "_"), flag.lstrip("-").replace("_", "-")}
    for token in argv:
        key = token.partition("=")[0]
        if token.startswith("-") and key.lstrip("-") in variants:
            return key
    return None


def order(judged: List[Tuple[object, str, Optional[str]]]) -> List[Tuple[object, str, Optional[str]]]:
    """Applying fixes in the playbook's order, then the conditional ones; the rest are dropped. A fix
    about what the job is seen to do (SPECIFIC_KEYS, applying) goes before the general ones: the W&B
    fix first for a job waiting in wandb.init, the regex fix first for a thread busy in the regex
    engine."""
    applying = [j for j in judged if j[1] == APPLIES]
    specific = [j for j in applying if SPECIFIC_KEYS & set(getattr(j[0], "applies", None) or {})]
    return specific + [j for j in applying if j not in specific] + [j for j in judged if j[1] == CONDITIONAL]
