"""`debug-stuck stop`: write the diagnosis report, then end the job's whole process tree, safely."""

from __future__ import annotations

import json
import os
import sys
from typing import List

from debug_stuck.frontends.commands.common import add_command, number, pid_number, progress_printer, stdin_is_tty

EXIT_NOT_STOPPED = 1  # the question was answered no (or not at all): nothing was done
EXIT_PROCESSES_LEFT = 4  # some processes survived SIGKILL (D state), listed in the output
HELP = "write the diagnosis report, then stop the job's whole process tree (asks first; --yes in scripts)"


def register(subparsers) -> None:
    s = add_command(
        subparsers,
        "stop",
        run,
        help=HELP,
        description="Write the diagnosis report first (evidence before teardown: Markdown and JSON), then end the "
        "job's whole process tree (launcher, ranks, DataLoader workers) by PID: SIGINT, wait, SIGTERM, wait, "
        "SIGKILL. Other processes are never touched. Processes left in uninterruptible sleep (D) are listed.",
        epilog=f"exit codes: 0 stopped; {EXIT_NOT_STOPPED} not stopped (the question was answered no); 2 bad usage, "
        f"or no --yes without a terminal; 3 no such process; {EXIT_PROCESSES_LEFT} some processes survived SIGKILL",
    )
    s.add_argument("--pid", type=pid_number, metavar="P", required=True, help="a process of the job to stop")
    s.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation (needed without a terminal)")
    s.add_argument(
        "--grace",
        type=number(0, 600),
        default=10.0,
        metavar="S",
        help="seconds to wait after SIGINT and after SIGTERM, up to 600 (10)",
    )
    s.add_argument("--report-dir", metavar="DIR", help="where the report goes (default: this directory)")
    s.add_argument("--format", choices=("json", "text"), default="text", help="output format (default text)")


def run(args) -> int:
    from debug_stuck.actions.stop import stop_job
    from debug_stuck.errors import BadInput, NotInspectable
    from debug_stuck.recovery.jobtree import job_tree_pids

    report_dir = os.path.abspath(os.path.expanduser(args.report_dir or "."))
    try:
        os.makedirs(report_dir, exist_ok=True)
    except OSError as exc:
        hint = "give a writable directory"
        raise BadInput(f"cannot create --report-dir {args.report_dir}: {exc.strerror}", hint) from None
    if not os.access(report_dir, os.W_OK):
        raise BadInput(f"--report-dir {report_dir} is not writable", "give a writable directory for the report")
    try:
        root, pids = job_tree_pids(args.pid)  # exit 3 when the PID does not exist
    except NotInspectable as exc:
        # The shared message suggests resume's --cmd/--dir, which stop does not take: a hint stop can use.
        raise NotInspectable(exc.message, _stop_hint(exc)) from None
    if not args.yes and not stdin_is_tty():
        raise BadInput(
            f"refusing to stop {len(pids)} process(es) of job {root} without confirmation (no terminal)",
            f"add --yes: debug-stuck stop --pid {args.pid} --yes",
        )
    if not args.yes and not _confirm(root, pids):
        print(f"not stopped: nothing was signalled (exit {EXIT_NOT_STOPPED})", file=sys.stderr)
        return EXIT_NOT_STOPPED
    try:
        result = stop_job(args.pid, report_dir=report_dir, grace=args.grace, progress=progress_printer())
    except NotInspectable as exc:
        raise NotInspectable(exc.message, _stop_hint(exc)) from None
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        sys.stdout.write(result.summary() + "\n")
    return EXIT_PROCESSES_LEFT if result.left else 0


def _stop_hint(exc) -> str:
    if "--cmd" not in exc.hint and "--dir" not in exc.hint:
        return exc.hint
    if "does not exist" in exc.message or "exited" in exc.message:
        return "check the PID with ps (e.g. ps -ef | grep train); a job that already ended needs no stop"
    return "run debug-stuck stop as the job's user or as root"


def _confirm(root: int, pids: List[int]) -> bool:
    from debug_stuck.actions.stop import job_listing

    print(f"debug-stuck stop: job {root}, {len(pids)} process(es):", file=sys.stderr)
    for pid, role, command in job_listing(root)[:40]:
        print(f"  {pid:>7}  {role:18} {command[:90]}", file=sys.stderr)
    print("A report is written first; then SIGINT, SIGTERM and SIGKILL end them.", file=sys.stderr)
    try:
        answer = input("Stop them? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
