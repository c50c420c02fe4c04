"""`debug-stuck watch`: run or attach to a job, notice when it stalls, report, and stop or restart it.

Everything after ``--`` is the command to launch and arrives as ``args.launch``.

Output: with ``--format json`` stdout carries one JSON object per event and nothing else (the job's
own output is teed to stderr); with ``--format text`` the job's output goes to stdout as if it ran
alone and the watcher's lines go to stderr, prefixed ``debug-stuck watch:``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, List, Optional

from debug_stuck.errors import BadInput
from debug_stuck.frontends.commands.common import add_command, number, pid_number, seconds_text

WATCH_EPILOG = """examples:
  debug-stuck watch -- torchrun --nproc_per_node=8 train.py --config c.yaml
  debug-stuck watch --on-hang restart --max-restarts 3 -- python train.py
  debug-stuck watch --pid 12345 --format json

a stall: no new step for max(--floor, --multiple x the median step interval, 2 x the longest recent
interval); a checkpoint save or validation recognised on the stack is allowed --phase-multiple times
that while it shows activity (CPU, I/O, stack movement), and so is a busy phase (computing through
changing functions); a silence computing on one chain of functions is a stall unless the job ended
such silences with a step before (then up to 2 x the longest). Before the first steps: no activity
at all for --startup seconds.

exit status: the job's own when it ends by itself; 124 when it stalled and watch stopped it
(--on-hang stop, or --on-hang restart gave up); 128+N when watch got signal N (passed on to the job);
2 bad usage, or a stop or restart not done because the report could not be written; 3 the --pid
cannot be inspected."""


ON_HANG = ("report", "stop", "restart")


def register(subparsers) -> None:
    """Imports nothing heavy (the CLI's --help must stay instant): numeric options default to None and
    take debug_stuck.actions.watch.watcher.WatchSettings' defaults in run."""
    p = add_command(
        subparsers,
        "watch",
        run,
        help="watchdog: run or attach to a job, report (and stop or restart) when it stalls",
        description="Run a training job (after --) or attach to one (--pid), notice within seconds when it "
        "stops making progress, write the diagnosis report, and act per --on-hang.",
        epilog=WATCH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--pid", type=pid_number, metavar="P", help="attach to this running job instead of launching one")
    p.add_argument(
        "--on-hang",
        choices=ON_HANG,
        default="report",
        help="on a stall: write the report and keep watching (default), stop the job, or stop and restart it "
        "from its last good checkpoint",
    )
    p.add_argument(
        "--max-restarts",
        type=int,
        metavar="N",
        help="restart at most N times (default 3); never again after a stall that made "
        "no progress since the last restart",
    )
    p.add_argument("--format", choices=("json", "text"), default="text", help="event format (default text)")
    p.add_argument(
        "--report-dir",
        metavar="DIR",
        help="where incident reports and the job's log go (default ./debug-stuck-reports)",
    )
    p.add_argument(
        "--log", action="append", default=[], metavar="FILE", help="another log to follow for progress (repeatable)"
    )
    p.add_argument("--quiet", action="store_true", help="do not echo the job's output (it still goes to its log)")
    p.add_argument("--poll", type=number(), metavar="S", help="seconds between checks (default 1)")
    p.add_argument("--floor", type=number(), metavar="S", help="the shortest stall threshold (default 10)")
    p.add_argument(
        "--multiple",
        type=number(),
        metavar="X",
        help="threshold as a multiple of the median step interval (default 8)",
    )
    p.add_argument(
        "--phase-multiple",
        type=number(),
        metavar="X",
        help="allowance for a recognised checkpoint/validation phase or a busy phase, times the threshold (default 30)",
    )
    p.add_argument(
        "--startup",
        type=number(),
        metavar="S",
        help="before steps flow: seconds with no activity at all that count as a stall (default 300)",
    )
    p.add_argument(
        "--progress-every",
        type=number(),
        metavar="S",
        help="a progress event every S seconds (default 60; 0: none)",
    )
    p.add_argument(
        "--grace",
        type=number(),
        metavar="S",
        help="stopping: seconds to wait after SIGINT and after SIGTERM before SIGKILL (default 10)",
    )
    p.add_argument("--no-native", dest="native", action="store_false", help="reports: Python frames only")
    p.add_argument("--no-journal", dest="journal", action="store_false", help="do not record incidents in the journal")


def run(args) -> int:
    from debug_stuck.actions.watch.watcher import Watcher, WatchSettings

    launch: List[str] = list(getattr(args, "launch", None) or [])
    if args.pid is not None and launch:
        raise BadInput("give either --pid or a command after --, not both", "--pid P attaches, -- CMD launches")
    if args.pid is None and not launch:
        raise BadInput("nothing to watch", "give a command after --, e.g. debug-stuck watch -- python train.py")
    json_mode = args.format == "json"
    given = {
        name: getattr(args, name)
        for name in (
            "max_restarts",
            "poll",
            "floor",
            "multiple",
            "phase_multiple",
            "startup",
            "progress_every",
            "grace",
        )
        if getattr(args, name, None) is not None
    }
    if getattr(args, "report_dir", None):
        given["report_dir"] = Path(args.report_dir)
    settings = WatchSettings(
        on_hang=args.on_hang,
        native=args.native,
        logs=followable_logs(args.log),
        echo=None if args.quiet else _echo_to(sys.stderr if json_mode else sys.stdout),
        journal=args.journal,
        **given,
    )
    emit = _print_json if json_mode else _print_text
    watcher = Watcher(settings, emit)
    if args.pid is not None:
        return watcher.watch_pid(args.pid)
    return watcher.watch_command(launch)


def followable_logs(paths: List[str]) -> List[str]:
    """The --log files worth following. One that exists but is no regular file (a FIFO, a device, a
    directory) would be followed for ever without a line: said once on stderr and left out. One that
    does not exist yet is kept: the job may create it."""
    from debug_stuck.inputs import LOG_EXPECTED, InputError, check_input

    kept = []
    for path in paths:
        try:
            check_input(path, "log", LOG_EXPECTED)
        except InputError as exc:
            if not exc.missing:
                print(f"debug-stuck watch: {exc.one_line()}", file=sys.stderr, flush=True)
                continue
        kept.append(path)
    return kept


def _echo_to(stream) -> Callable[[bytes], None]:
    state = {"ok": True}
    target = getattr(stream, "buffer", None)

    def echo(data: bytes) -> None:
        if not state["ok"]:
            return
        try:
            if target is not None:
                stream.flush()
                target.write(data)
                target.flush()
            else:
                stream.write(data.decode("utf-8", errors="replace"))
                stream.flush()
        except (OSError, ValueError):
            state["ok"] = False  # the reader went away: the job keeps running, its log keeps everything

    return echo


def _print_json(event: dict) -> None:
    try:
        sys.stdout.write(json.dumps(event, default=str) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    if event.get("refused"):  # a stop or restart not done: the person at the terminal hears it too
        _print_text(event)


def _print_text(event: dict) -> None:
    line = describe_event(event)
    if line is None:
        return
    try:
        print(f"debug-stuck watch: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def describe_event(e: dict) -> Optional[str]:
    """One human line per event."""
    kind = e.get("event")
    if kind == "started":
        how = "attached to" if e.get("attached") else "started"
        where = f"; log {e['log']}" if e.get("log") else ""
        return f"{how} pid {e.get('pid')}: {' '.join(e.get('command') or [])}{where}; on a stall: {e.get('on_hang')}"
    if kind == "progress":
        if e.get("step") is None:
            return f"pid {e.get('pid')}: no step counter seen yet ({e.get('processes')} processes)"
        interval = e.get("interval")
        rhythm = f", a step every {interval:.2f} s" if interval else ""
        return f"step {e['step']}{rhythm}; stall threshold {seconds_text(e.get('threshold'))}"
    if kind == "phase" and e.get("phase") == "busy":
        how = "computing through changing functions" if e.get("motion") == "moving" else "computing"
        learned = f", as it did for {seconds_text(e['learned'])} before" if e.get("learned") else ""
        return (
            f"busy phase ({how}{learned}; {e.get('frame')}): allowing up to {seconds_text(e.get('allowance'))} "
            "without a step"
        )
    if kind == "phase":
        return (
            f"{e.get('phase')} phase ({e.get('frame')}): allowing up to {seconds_text(e.get('allowance'))} "
            "while it shows activity"
        )
    if kind == "stall":
        step = f" after step {e['last_step']}" if e.get("last_step") is not None else ""
        cause = f"; likely cause: {e['cause']}" if e.get("cause") else ""
        evidence = e.get("evidence") or {}
        stack = evidence.get("stack")
        other = evidence.get("stack_pid") not in (None, e.get("pid"))
        whose = f"main thread of pid {evidence['stack_pid']}" if other else "main thread"
        where = f"; {whose} in {stack}" if stack else ""
        return (
            f"STALL: pid {e.get('pid')} made no progress for {seconds_text(e.get('seconds'))}{step} "
            f"(threshold {seconds_text(e.get('threshold'))}){cause}{where}"
        )
    if kind == "report":
        if e.get("error") and not e.get("paths"):
            return f"report: {e['error']}"
        cause = e.get("cause") or "no cause named"
        conf = f" ({e['confidence']:.0%})" if e.get("cause") and e.get("confidence") else ""
        paths = e.get("paths") or {}
        return f"report: {cause}{conf}: {e.get('summary') or ''} -> {paths.get('markdown', '?')}"
    if kind == "action":
        done = f": stopped {len(e['stopped'])} process(es)" if e.get("stopped") else ""
        left = f"; still alive: {e['left']}" if e.get("left") else ""
        error = f"; {e['error']}" if e.get("error") else ""
        return f"{e.get('action')} pid {e.get('pid')} ({e.get('reason')}){done}{left}{error}"
    if kind == "restarted":
        ckpt = f" from {e['checkpoint']}" if e.get("checkpoint") else ""
        note = f" ({e['note']})" if e.get("note") else ""
        cmd = " ".join(e.get("command") or [])
        count = f"restart {e.get('attempt')} of {e.get('max_restarts')}"
        return f"restarted{ckpt} as pid {e.get('pid')} ({count}): {cmd}{note}"
    if kind == "resumed":
        return f"pid {e.get('pid')} is moving again (step {e.get('step')})"
    if kind == "gave-up":
        return f"GAVE UP: {e.get('reason')}"
    if kind == "warning":
        return f"warning: {e.get('message')}"
    if kind == "exited":
        code = e.get("code")
        how = f"exit code {code}" if code is not None else "exit code unknown (attached)"
        if e.get("forwarded"):
            return f"pid {e.get('pid')} was stopped by the {e['forwarded']} watch passed on: {how}"
        return f"pid {e.get('pid')} ended by itself: {how}"
    return None
