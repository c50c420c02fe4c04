"""`debug-stuck resume` and `debug-stuck stop`: the command-line side of assistant.recovery.

Wiring (assistant/cli.py): ``recovery_cli.add_parser(sub)`` adds both subcommands; dispatch
``args.command == "resume"`` to ``run_resume(args)`` and ``"stop"`` to ``run_stop(args)`` (or
``run(args)`` for either). Errors are raised as BadInput (exit 2) / NotInspectable (exit 3).
``python -m assistant.recovery_cli resume|stop ...`` runs them standalone.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import List, Optional

EXIT_PROCESSES_LEFT = 4  # stop: some processes survived SIGKILL (D state), listed in the output

RESUME_HELP = "print the command that resumes a job from its newest valid checkpoint"
STOP_HELP = "write the diagnosis report, then stop the job's whole process tree (asks first; --yes in scripts)"


def add_parser(subparsers) -> None:
    """Add the `resume` and `stop` subcommands to the CLI's subparsers."""
    r = subparsers.add_parser(
        "resume",
        help=RESUME_HELP,
        description="Detect the launcher and framework of a job, find its newest checkpoint that passes the format "
        "checks (a half-written one from the hung save is skipped and named), and print the exact command that "
        "resumes from it. For a running job give --pid; for one that already ended give --cmd and --dir.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  debug-stuck resume --pid 12345\n"
        '  debug-stuck resume --cmd "torchrun --nproc_per_node=8 -m scripts.base_train" --dir ~/nanochat\n'
        "  debug-stuck resume --pid 12345 --format json   # the report's `resume` object",
    )
    r.add_argument("--pid", type=int, metavar="P", help="a process of the running job (any rank, worker or launcher)")
    r.add_argument("--cmd", metavar='"COMMAND"', help="the job's command line, quoted, for a job that already ended")
    r.add_argument("--dir", metavar="DIR", help="with --cmd: the directory the job ran in (default: this one)")
    r.add_argument("--format", choices=("json", "text"), default="text", help="output format (default text)")

    s = subparsers.add_parser(
        "stop",
        help=STOP_HELP,
        description="Write the diagnosis report first (evidence before teardown: Markdown and JSON), then end the "
        "job's whole process tree (launcher, ranks, DataLoader workers) by PID: SIGINT, wait, SIGTERM, wait, "
        "SIGKILL. Other processes are never touched. Processes left in uninterruptible sleep (D) are listed.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"exit codes: 0 stopped; 2 bad usage, or no --yes without a terminal; 3 no such process; "
        f"{EXIT_PROCESSES_LEFT} some processes survived SIGKILL",
    )
    s.add_argument("--pid", type=int, metavar="P", required=True, help="a process of the job to stop")
    s.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation (needed without a terminal)")
    s.add_argument(
        "--grace", type=float, default=10.0, metavar="S", help="seconds to wait after SIGINT and after SIGTERM (10)"
    )
    s.add_argument("--report-dir", metavar="DIR", help="where the report goes (default: this directory)")
    s.add_argument("--format", choices=("json", "text"), default="text", help="output format (default text)")


def run(args) -> int:
    if args.command == "resume":
        return run_resume(args)
    return run_stop(args)


# -- resume ----------------------------------------------------------------------------------------


def run_resume(args) -> int:
    from assistant.errors import BadInput
    from assistant.recovery import plan_resume, plan_resume_for_pid

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
        sys.stdout.write(render_plan(plan))
    return 0


def render_plan(plan) -> str:
    out: List[str] = [f"framework: {plan.framework} (launcher: {plan.launcher})"]
    out.append(f"checkpoint: {plan.checkpoint.label() if plan.checkpoint else 'none usable'}")
    for cp in plan.skipped:
        out.append(f"skipped: {cp.path}: {cp.problem}")
    if plan.lost:
        out.append(f"lost: {plan.lost}")
    for note in plan.notes:
        out.append(f"note: {note}")
    if plan.command:
        here = plan.cwd and os.path.abspath(plan.cwd) == os.path.abspath(os.getcwd())
        out.append("resume with:" if here else f"resume with (in {plan.cwd}):")
        out.append(plan.command if here or not plan.cwd else f"cd {shlex.quote(plan.cwd)} && {plan.command}")
    return "\n".join(out) + "\n"


# -- stop ------------------------------------------------------------------------------------------


def run_stop(args) -> int:
    from assistant.errors import BadInput
    from assistant.recovery import job_tree_pids, stop_job

    if not (0 <= args.grace <= 600):
        raise BadInput(f"--grace {args.grace:g} is out of range", "give seconds between 0 and 600")
    report_dir = os.path.abspath(os.path.expanduser(args.report_dir or "."))
    try:
        os.makedirs(report_dir, exist_ok=True)
    except OSError as exc:
        hint = "give a writable directory"
        raise BadInput(f"cannot create --report-dir {args.report_dir}: {exc.strerror}", hint) from None
    if not os.access(report_dir, os.W_OK):
        raise BadInput(f"--report-dir {report_dir} is not writable", "give a writable directory for the report")
    root, pids = job_tree_pids(args.pid)  # exit 3 when the PID does not exist
    interactive = _stdin_is_tty()
    if not args.yes and not interactive:
        raise BadInput(
            f"refusing to stop {len(pids)} process(es) of job {root} without confirmation (no terminal)",
            f"add --yes: debug-stuck stop --pid {args.pid} --yes",
        )
    if not args.yes and not _confirm(root, pids):
        print("not stopped", file=sys.stderr)
        return 0
    say = (lambda msg: print(f"debug-stuck: {msg}...", file=sys.stderr)) if sys.stderr.isatty() else None
    result = stop_job(args.pid, report_dir=report_dir, grace=args.grace, progress=say)
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        sys.stdout.write(render_stop(result))
    return EXIT_PROCESSES_LEFT if result.left else 0


def _stdin_is_tty() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _confirm(root: int, pids: List[int]) -> bool:
    from probes.procs import job_processes

    try:
        procs = job_processes([root])
    except Exception:
        procs = []
    print(f"debug-stuck stop: job {root}, {len(pids)} process(es):", file=sys.stderr)
    for p in procs[:40]:
        print(f"  {p.pid:>7}  {p.role:18} {' '.join(p.cmdline)[:90]}", file=sys.stderr)
    print("A report is written first; then SIGINT, SIGTERM and SIGKILL end them.", file=sys.stderr)
    try:
        answer = input("Stop them? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def render_stop(result) -> str:
    return result.summary() + "\n"


# -- standalone ------------------------------------------------------------------------------------


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m assistant.recovery_cli resume|stop ...``, with the CLI's error conventions."""
    from assistant.cli import _Parser
    from assistant.errors import run_guarded

    parser = _Parser(prog="debug-stuck")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    add_parser(sub)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command is None:
        parser.print_help()
        return 2
    return run_guarded(run, args)


if __name__ == "__main__":
    sys.exit(main())
