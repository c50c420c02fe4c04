"""`debug-stuck fix`: the fix for this job, down to the edit in its own code, as a unified diff.

`fix --pid P` diagnoses the live job and shows its first fix (filled in) and, where the blocking
frame or the call that made the blocking object is in the user's source, the suggested change as a
diff. It writes nothing. `fix --report FILE --apply` applies the edits of a saved JSON report
(`diagnose --format json --output FILE`, or the one `stop` writes) once the job no longer runs,
after a confirmation (`--yes` in scripts), keeping a backup of every file it changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import List

from debug_stuck.frontends.commands.common import (
    add_command,
    emit,
    pid_number,
    progress_printer,
    stdin_is_tty,
    window_seconds,
)

MAX_REPORT_BYTES = 20 * 1024 * 1024


def register(subparsers) -> None:
    f = add_command(
        subparsers,
        "fix",
        run,
        help="the fix for this job: filled-in commands and the edit in your code as a diff (--apply to write it)",
        description="Diagnose the job (--pid) or read a saved JSON report (--report) and show the fix for it: the "
        "first fix with this job's PIDs, paths and command filled in, and the suggested change to your own code as "
        "a unified diff where the stack shows the blocking call in your source. Nothing is written without --apply, "
        "and never while the job runs.",
        epilog="exit codes: 0 shown (or applied); 2 bad usage, the job still runs, no --yes without a terminal, or "
        "the file changed since the report; 3 the job could not be inspected",
    )
    f.add_argument("--pid", action="append", type=pid_number, default=[], metavar="P", help="a process of the hung job")
    f.add_argument("--report", metavar="FILE", help="a JSON report written by diagnose --format json or by stop")
    f.add_argument("--apply", action="store_true", help="write the suggested edits (the job must have stopped)")
    f.add_argument("--yes", "-y", action="store_true", help="do not ask before writing (needed without a terminal)")
    f.add_argument(
        "--window", type=window_seconds, default=1.0, metavar="S", help="seconds between stack samples (default 1)"
    )
    f.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    f.add_argument("--output", metavar="FILE", help="also save the full JSON report here (for a later --apply)")


def run(args) -> int:
    from debug_stuck.errors import BadInput

    if bool(args.pid) == bool(args.report):
        raise BadInput("give the job (--pid P) or a saved report (--report FILE)", "debug-stuck fix --pid 12345")
    report = _load_report(args.report) if args.report else _diagnose(args)
    if args.apply:
        return _apply(report, args)
    if args.format == "json":
        emit(json.dumps(_summary(report), indent=2) + "\n")
    else:
        emit(_text(report, saved=args.output or args.report))
    return 0


def _diagnose(args) -> dict:
    from debug_stuck.pipeline import DiagnoseRequest, diagnose
    from debug_stuck.render import render

    pids = list(dict.fromkeys(args.pid))
    request = DiagnoseRequest(pids=pids, window=args.window, progress=progress_printer(), resume_pid=pids[0])
    report = diagnose(request)
    if args.output:
        emit(render(report, "json"), args.output)
    return report.to_dict()


def _load_report(path: str) -> dict:
    from debug_stuck.errors import BadInput
    from debug_stuck.inputs import read_input

    data = read_input(path, "--report", MAX_REPORT_BYTES + 1, expected="give a JSON report file")
    if len(data) > MAX_REPORT_BYTES:
        raise BadInput(f"--report {path} is over 20 MiB", "give a JSON report file")
    try:
        report = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise BadInput(
            f"--report {path} is not a JSON report", "write one with: debug-stuck diagnose --format json --output FILE"
        ) from None
    if not isinstance(report, dict) or "verdict" not in report:
        raise BadInput(f"--report {path} is not a debug-stuck report", "it needs verdict, diagnoses and edits")
    return report


def _summary(report: dict) -> dict:
    top = (report.get("diagnoses") or [{}])[0]
    return {
        "verdict": report.get("verdict"),
        "fix": (top.get("fixes") or [None])[0],
        "check": (top.get("check_items") or [None])[0],
        "edits": report.get("edits") or [],
        "job": report.get("job") or {},
    }


def _text(report: dict, saved=None) -> str:
    out: List[str] = []
    verdict = report.get("verdict") or {}
    out.append(verdict.get("summary") or "No verdict.")
    top = (report.get("diagnoses") or [{}])[0]
    fixes = top.get("fixes") or []
    if fixes:
        fix = fixes[0]
        label = ", ".join(dict.fromkeys(s.get("text", "") for s in fix.get("safety") or []))
        condition = f" ({fix['condition']})" if fix.get("condition") else ""
        out += ["", f"Fix: {fix['title']}{condition}" + (f" [{label}]" if label else "")]
        out += ["    " + line for cmd in fix.get("commands") or [] for line in cmd.splitlines()]
        if fix.get("unfilled"):
            out.append(f"    needs: {', '.join(fix['unfilled'])} (not known from this job: fill in by hand)")
    edits = report.get("edits") or []
    if not edits:
        out += ["", "No edit to your code: the blocking call is not in your own source (or needs no change)."]
    for edit in edits:
        out += ["", f"Edit {edit['file']}:{edit['line']} ({edit['found']}): {edit['why']}", edit["diff"].rstrip("\n")]
    if edits:
        pid = (report.get("job") or {}).get("values", {}).get("pid")
        out.append("")
        out.append("Nothing was written. To apply, once the job has stopped:")
        if saved:
            out.append(f"    debug-stuck fix --report {saved} --apply")
        else:
            stop = f"debug-stuck stop --pid {pid}" if pid else "debug-stuck stop --pid PID"
            out.append(f"    {stop}    # writes the report (JSON) before it stops the job")
            out.append("    debug-stuck fix --report debug-stuck-<pid>-<time>.json --apply")
    return "\n".join(out) + "\n"


def _apply(report: dict, args) -> int:
    from debug_stuck.actions.edits import apply_edit, read_source
    from debug_stuck.errors import BadInput
    from debug_stuck.kb import load_knowledge
    from debug_stuck.writer import write_file

    edits = report.get("edits") or []
    if not edits:
        raise BadInput("the report holds no edit to apply", "see its fixes: debug-stuck fix --report FILE")
    running = _still_running(report)
    if running:
        raise BadInput(
            f"the job still runs (pid {running}): nothing was written",
            f"stop it first: debug-stuck stop --pid {running}; then fix --report FILE --apply",
        )
    if not args.yes and not stdin_is_tty():
        raise BadInput("refusing to change your code without confirmation (no terminal)", "add --yes")
    knowledge = load_knowledge()
    prepared = []
    for edit in edits:
        try:
            diff, new_text = apply_edit(edit, knowledge)
        except ValueError as exc:
            raise BadInput(str(exc), "diagnose again, or edit the file by hand") from None
        prepared.append((edit, diff, new_text))
    for edit, diff, new_text in prepared:
        print(diff.rstrip("\n"))
        if not args.yes and not _confirm(edit["file"]):
            print(f"not changed: {edit['file']}", file=sys.stderr)
            continue
        path = edit["file"]
        mode = os.stat(path).st_mode & 0o777
        backup = f"{path}.bak-{time.strftime('%Y%m%d-%H%M%S')}"
        # the backup is the text the edit was checked against: read bounded, and its hash checked again
        original = read_source(path)
        if original is None or hashlib.sha256(original.encode("utf-8")).hexdigest() != edit["sha256"]:
            print(f"not changed: {path} changed while the edit was being applied; diagnose again", file=sys.stderr)
            continue
        write_file(backup, original.encode("utf-8"), mode=mode)
        write_file(path, new_text, mode=mode)
        print(f"changed {path} (backup: {backup})")
    return 0


def _still_running(report: dict):
    """A pid of the report's job that still runs the same command, or None."""
    import psutil

    for process in report.get("processes") or []:
        pid = process.get("pid")
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            started = proc.create_time()
        except (psutil.Error, TypeError, ValueError):
            continue
        created = process.get("create_time")
        if created is None or abs(float(created) - started) < 1.0:
            return pid
    return None


def _confirm(path: str) -> bool:
    sys.stderr.write(f"Apply this change to {path}? A backup is kept. [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")
