"""The `debug-stuck` command line. Thin: the parser is assembled from one module per subcommand
(`debug_stuck.frontends.commands`), each registering its own arguments; the work is in the core.

Only argparse and the command modules (which import nothing heavy at load) are read at start-up,
so `--help` and `--version` answer at once; each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from typing import List, Optional

from debug_stuck import __version__
from debug_stuck.frontends.commands import interactive
from debug_stuck.frontends.commands.common import EXIT_CODES, Parser

# In the order `--help` lists them.
COMMANDS = ("diagnose", "fix", "demo", "probe", "resume", "stop", "watch", "history", "snapshot", "skills")

# The manual pages (docs/ in the repository; `mkdocs serve` shows them as a site) that explain each
# command, by path and title (the page's heading); its --help ends with them. None: bare `debug-stuck`.
PAGES = {
    "docs/index.md": "The debug-stuck manual",
    "docs/getting-started.md": "Getting started",
    "docs/attach.md": "Attach to a hung job",
    "docs/reports.md": "Reading a report",
    "docs/pytorch-evidence.md": "PyTorch's own evidence: Flight Recorder, debug server, NCCL RAS",
    "docs/probes.md": "Targeted probes",
    "docs/recovery.md": "Recovery: stop, resume, watch",
    "docs/multinode.md": "Many nodes: Slurm and ssh",
    "docs/knowledge-base.md": "The knowledge base",
    "docs/agents.md": "The agent skill",
}
MANUAL = {
    None: ("docs/index.md",),
    "diagnose": ("docs/attach.md", "docs/reports.md", "docs/pytorch-evidence.md"),
    "fix": ("docs/reports.md",),
    "demo": ("docs/getting-started.md",),
    "probe": ("docs/probes.md",),
    "resume": ("docs/recovery.md",),
    "stop": ("docs/recovery.md",),
    "watch": ("docs/recovery.md",),
    "history": ("docs/recovery.md",),
    "snapshot": ("docs/multinode.md",),
    "skills": ("docs/knowledge-base.md", "docs/agents.md"),
}


def manual_line(command: Optional[str]) -> str:
    """`manual: docs/attach.md (Attach to a hung job)`: where the manual explains `command`."""
    return "manual: " + ", ".join(f"{path} ({PAGES[path]})" for path in MANUAL[command])


def _end_with_manual(parser: argparse.ArgumentParser, line: str) -> None:
    """The help of `parser` and of every parser below it (skills check, ...) ends with `line`."""
    if parser.formatter_class is argparse.HelpFormatter and not parser.description and not parser.epilog:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the line as it is, never rewrapped
    parser.epilog = f"{parser.epilog}\n\n{line}" if parser.epilog else line
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _end_with_manual(child, line)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="debug-stuck",
        description="Find out why a training job stopped moving, and get it going again.\n"
        "Without a command: the guided session (Textual TUI on a terminal; --plain for simple prompts).",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"debug-stuck {__version__}")
    interactive.register(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in COMMANDS:
        importlib.import_module(f"debug_stuck.frontends.commands.{name}").register(sub)
    for name, command in sub.choices.items():
        _end_with_manual(command, manual_line(name))
    parser.epilog = f"{parser.epilog}\n\n{manual_line(None)}"
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    launch: List[str] = []
    if "--" in argv:  # everything after -- is the user's command, never our options
        cut = argv.index("--")
        argv, launch = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    args.launch = launch
    from debug_stuck.errors import DebugStuckError, Terminated

    previous = _unwind_on_termination()
    try:
        if args.command is None:
            return interactive.run(args)
        return args.run(args)
    except DebugStuckError as exc:
        print(f"debug-stuck: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        what = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"debug-stuck: {what}{_end_what_we_started()}", file=sys.stderr)
        return 128 + int(signum)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); nothing more to say.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _unwind_on_termination() -> dict:
    """SIGTERM and SIGHUP unwind the stack like Ctrl-C (the default would end us on the spot and
    leave a probe's child, its workers or ranks running, and its scratch folders behind)."""
    from debug_stuck.errors import Terminated

    if threading.current_thread() is not threading.main_thread():
        return {}

    def unwind(signum, frame):
        raise Terminated(signum)

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[signum] = signal.signal(signum, unwind)
        except (OSError, ValueError):
            pass
    return previous


def _end_what_we_started() -> str:
    """Whatever a probe still runs (it may be in a worker thread) and its scratch folders."""
    from debug_stuck.bounded import end_everything_started

    try:
        processes, folders = end_everything_started()
    except Exception as exc:  # the way out must not fail
        return f"; could not end what it started: {type(exc).__name__}: {exc}"
    done = []
    if processes:
        done.append(f"stopped {processes} process{'es' if processes != 1 else ''} it started")
    if folders:
        done.append(f"removed {folders} scratch folder{'s' if folders != 1 else ''}")
    return f": {', '.join(done)}" if done else ""


if __name__ == "__main__":
    sys.exit(main())
