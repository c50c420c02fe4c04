"""Get a hung job going again: the newest usable checkpoint and the exact command that resumes from it.

``plan_resume`` reads the command line (launcher, script, arguments), the script's source (as
text: never imported or run), the environment and the files the job wrote, and returns a
``ResumePlan``: the framework, the newest checkpoint that passes the format checks of
``debug_stuck.recovery.checkpoints``, the broken ones it skipped (named, with why), the exact
command that resumes, and what is lost. Each framework's conventions live in
``debug_stuck.recovery.frameworks``.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from typing import Dict, List, Optional, Tuple

import psutil

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.errors import BadInput, NotInspectable
from debug_stuck.recovery import frameworks
from debug_stuck.recovery.job import TrainingJob
from debug_stuck.recovery.jobtree import job_root, read_cmdline, refuse_unless_a_job
from debug_stuck.recovery.model import NO_CHECKPOINT, Checkpoint, ResumePlan
from debug_stuck.recovery.reading import READ_SECONDS, bounded_read, seen_from
from debug_stuck.redact import REDACTED, redact_argv, redact_env, redact_obj

SKIPPED_SHOWN = 20
RESUME_PLAN_SECONDS = 10.0

__all__ = [
    "NO_CHECKPOINT",
    "ResumePlan",
    "add_resume",
    "detect_framework",
    "find_checkpoints",
    "mark_finished",
    "plan_resume",
]


def detect_framework(cmdline: List[str], env: Dict[str, str], cwd: str) -> Tuple[str, str]:
    """(framework, launcher) from the command line, the script's source, the environment and files."""
    job = TrainingJob(cmdline, cwd, env)
    return frameworks.detect(job), job.launch.launcher


def find_checkpoints(
    framework: str, cmdline: List[str], cwd: str, env: Optional[Dict[str, str]] = None
) -> List[Checkpoint]:
    """The framework's checkpoints for this job, newest first, each checked (``valid``, ``problem``)."""
    job = TrainingJob(cmdline, cwd, dict(os.environ) if env is None else env)
    return frameworks.find(job, framework)


def plan_resume(cmdline: List[str], cwd: str, env: Optional[Dict[str, str]] = None) -> ResumePlan:
    """How to resume this job: framework, newest valid checkpoint, the command, what is lost."""
    if not cmdline:
        raise BadInput("no command to resume", 'give the training command, e.g. --cmd "torchrun ... train.py"')
    job = TrainingJob(cmdline, cwd, dict(os.environ) if env is None else env)
    framework = frameworks.detect(job)
    found = frameworks.find(job, framework)
    chosen = next((c for c in found if c.valid), None)
    skipped = _skipped(found, chosen)
    plan = ResumePlan(
        framework=framework,
        launcher=job.launch.launcher,
        checkpoint=chosen,
        skipped=skipped,
        command=None,
        notes=[],
        lost=_lost(chosen, skipped),
        cwd=job.cwd,
    )
    argv = frameworks.module_for(framework).resume(job, plan)
    plan.argv = argv  # exact, for a program that relaunches the job
    shown = redact_argv(argv)
    plan.command = _command_text(shown, plan.env)  # for people and reports: secrets replaced
    if shown != argv:
        plan.notes.append(f"a secret in the command line was replaced by {REDACTED}: put it back before running")
    plan.notes.extend(n for n in job.notes if n not in plan.notes)
    return plan


def _skipped(found: List[Checkpoint], chosen: Optional[Checkpoint]) -> List[Checkpoint]:
    """The broken checkpoints a resume would have wanted: those ranked above the chosen one (a
    higher step), and those written after it (a truncated newest file whose step cannot be read is
    just what a hang during a save leaves), in rank order."""
    if chosen is None:
        return [c for c in found if not c.valid][:SKIPPED_SHOWN]
    above = found[: found.index(chosen)]
    return [c for c in found if not c.valid and (c in above or c.mtime >= chosen.mtime)][:SKIPPED_SHOWN]


def _command_text(argv: List[str], env: Dict[str, str]) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (prefix + " " if prefix else "") + " ".join(shlex.quote(a) for a in argv)


def _lost(chosen: Optional[Checkpoint], skipped: List[Checkpoint]) -> str:
    if chosen is None:
        return NO_CHECKPOINT
    if chosen.step is not None:
        return f"steps after {chosen.step}"
    if chosen.epoch is not None:
        return f"progress after epoch {chosen.epoch}"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(chosen.mtime))
    return f"progress after {when} (when the checkpoint was written)"


def _full_environ(proc: psutil.Process) -> Optional[Dict[str, str]]:
    return bounded_read(proc.environ, f"reading /proc/{proc.pid}/environ", None)


LAUNCHER_SET_ENV = re.compile(
    r"^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_RANK|ROLE_NAME|"
    r"ROLE_WORLD_SIZE|TORCHELASTIC_\w+|TORCH_NCCL_ASYNC_ERROR_HANDLING|OMP_NUM_THREADS)$"
)


def plan_resume_for_pid(pid: int) -> ResumePlan:
    """The resume plan for a live job: its launcher's command line, working directory and environment."""
    refuse_unless_a_job(pid)
    root = job_root(pid)
    cmdline = read_cmdline(root)
    if not cmdline:
        raise NotInspectable(
            f"cannot read the command line of process {root.pid}",
            'run as the job\'s user or root, or give it with --cmd "..." --dir DIR',
        )
    try:
        cwd = call_with_timeout(root.cwd, READ_SECONDS, f"reading the working directory of {root.pid}")
    except psutil.NoSuchProcess:
        raise NotInspectable(f"process {root.pid} exited while being read", "use --cmd and --dir") from None
    except (psutil.AccessDenied, PermissionError):
        raise NotInspectable(
            f"permission denied reading the working directory of process {root.pid}", "run as the job's user or root"
        ) from None
    except CallTimedOut as exc:
        raise NotInspectable(str(exc), "its working directory may be on a hung mount; use --cmd and --dir") from None
    environ = _full_environ(root)
    with seen_from(root.pid):  # its paths name its own files (a container, a private mount namespace)
        plan = plan_resume(cmdline, cwd, environ if environ is not None else dict(os.environ))
    if environ is None:
        plan.notes.append(f"could not read the environment of process {root.pid}: this shell's was used")
    else:
        from debug_stuck.probes.collectors.procs import RELEVANT_ENV

        relevant = redact_env({k: v for k, v in environ.items() if RELEVANT_ENV.match(k)})
        keep = {k: v for k, v in sorted(relevant.items()) if not LAUNCHER_SET_ENV.match(k) and k not in plan.env}
        if keep:
            shown = " ".join(f"{k}={v}" for k, v in list(keep.items())[:12])
            it = "it" if len(keep) == 1 else "them"
            plan.notes.append(f"the job ran with {shown}; set {it} in the shell you resume from: export {shown}")
    created = bounded_read(root.create_time, f"reading the start time of {root.pid}")
    if plan.checkpoint is not None and created and plan.checkpoint.mtime < created:
        plan.notes.append("the checkpoint was written before this run started (by an earlier run)")
    return plan


def add_resume(report, pid: int) -> None:
    """Put the resume plan of the job `pid` belongs to into the report (bounded: checkpoint
    folders are often on the very mount that hangs); a failure becomes one line in its errors."""
    if report.resume is not None:
        return
    try:
        report.resume = call_with_timeout(
            lambda: redact_obj(plan_resume_for_pid(pid).to_dict()), RESUME_PLAN_SECONDS, "planning the resume"
        )
    except CallTimedOut as exc:
        report.errors.append(f"resume: {exc}")
    except Exception as exc:  # the diagnosis stands without a resume plan
        message = exc.one_line() if hasattr(exc, "one_line") else f"{type(exc).__name__}: {exc}"
        report.errors.append(f"resume: could not plan: {message}")


def mark_finished(report) -> None:
    """A job whose main code has returned (its wait chain shows Python's exit joining a thread) has
    done its training: its resume plan says so in `finished`, since a rerun would train again."""
    if not report.resume:
        return
    for hop in report.chain or []:
        if (hop.get("waits_on") or {}).get("exit") == "yes":
            report.resume["finished"] = (
                f"{hop.get('who') or 'the job'} has run its main code to the end and waits in Python's exit "
                "for a thread: its training is done, and a rerun would train again"
            )
            return
    first = (report.chain or [{}])[0]
    handler = _exit_handler(report, first.get("pid"))
    if handler is not None:
        report.resume["finished"] = (
            f"{first.get('who') or 'the job'} has run its main code to the end: its main thread runs {handler}, "
            "called at exit (an atexit handler), with no script frame below it: its training is done, and a "
            "rerun would train again"
        )


# where a main thread's outermost Python frame is while the program itself runs: the script's module,
# runpy's for `python -m`, a console script's
_PROGRAM_FRAMES = ("<module>", "_run_module_as_main", "_run_code", "run_module")


def _exit_handler(report, pid) -> Optional[str]:
    """The function a main thread runs with no frame of the program below it: an atexit handler,
    which CPython calls once the main module has returned (Py_FinalizeEx -> atexit callbacks)."""
    from debug_stuck.probes.collectors.stacks import MAX_FRAMES

    process = next((p for p in report.processes or [] if p.get("pid") == pid), None)
    threads = (process or {}).get("threads") or []
    main = next((t for t in threads if t.get("tid") == pid), None)
    every = (main or {}).get("frames") or []
    frames = [f for f in every if not f.get("native")]
    if not frames or len(every) >= MAX_FRAMES or frames[-1].get("function") in _PROGRAM_FRAMES:
        return None  # a stack clipped to its innermost frames does not show its outermost
    return f"{frames[-1].get('function')} ({frames[-1].get('file')}:{frames[-1].get('line')})"
