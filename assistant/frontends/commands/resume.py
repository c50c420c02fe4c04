"""`debug-stuck resume`: the command that resumes a job from its newest valid checkpoint."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from debug_stuck.frontends.commands.common import add_command, pid_number

HELP = "print the command that resumes a job from its newest valid checkpoint"


def register(subparsers) -> None:
    r = add_command(
        subparsers,
        "resume",
        run,
        help=HELP,
        description="Detect the launcher and framework of a job, find its newest checkpoint that passes the format "
        "checks (a half-written one from the hung save is skipped and named), and print the exact command that "
        "resumes from it. For a running job give --pid; for one that already ended give --cmd and --dir.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  debug-stuck resume --pid 12345\n"
        '  debug-stuck resume --cmd "torchrun --nproc_per_node=8 -m scripts.base_train" --dir ~/nanochat\n'
        "  debug-stuck resume --pid 12345 --format json   # the report's `resume` object",
    )
    r.add_argument(
        "--pid", type=pid_number, metavar="P", help="a process of the running job (any rank, worker or launcher)"
    )
    r.add_argument("--cmd", metavar='"COMMAND"', help="the job's command line, quoted, for a job that already ended")
    r.add_argument("--dir", metavar="DIR", help="with --cmd: the directory the job ran in (default: this one)")
    r.add_argument("--format", choices=("json", "text"), default="text", help="output format (default text)")


def run(args) -> int:
    from debug_stuck.errors import BadInput
    from debug_stuck.recovery.plan import plan_resume, plan_resume_for_pid
    from debug_stuck.render.resume import render_resume_text

    if args.pid is not None and args.cmd is not None:
        raise BadInput("give --pid or --cmd, not both", "--pid for a running job, --cmd with --dir for an ended one")
    if args.pid is not None:
        if args.dir is not None:
            raise BadInput("--dir goes with --cmd", "with --pid the job's own working directory is read")
        plan = plan_resume_for_pid(args.pid)
    elif args.cmd is not None:
        try:
            cmdline = shlex.split(args.cmd)
        except ValueError as exc:
            hint = 'quote the whole command once: --cmd "python train.py ..."'
            raise BadInput(f"cannot split --cmd: {exc}", hint) from None
        if not cmdline:
            raise BadInput("--cmd is empty", 'give the training command, e.g. --cmd "torchrun ... train.py"')
        directory = os.path.abspath(os.path.expanduser(args.dir or "."))
        if not os.path.isdir(directory):
            raise BadInput(f"--dir {args.dir} is not a directory", "give the directory the job ran in")
        plan = plan_resume(cmdline, directory)
    else:
        raise BadInput("which job?", 'give --pid P (a running job) or --cmd "..." --dir DIR (one that ended)')
    if args.format == "json":
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        sys.stdout.write(render_resume_text(plan.to_dict(), here=os.getcwd()))
    return 0
