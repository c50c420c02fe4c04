"""Bare `debug-stuck`: the interactive session. The Textual app on a terminal; questionary prompts
with --plain or where the app cannot run; a one-line refusal when stdin is not a terminal.

Wiring (assistant/cli.py): `add_arguments(parser)` on the top-level parser, and `run(args)` when
no command is given. `python -m assistant.interactive_cli [--plain]` runs it on its own.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

NEEDS_TERMINAL = (
    "debug-stuck: the interactive session needs a terminal; "
    "for scripts and pipes use 'debug-stuck diagnose' (see 'debug-stuck diagnose --help')"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plain",
        action="store_true",
        help="interactive session with simple prompts instead of the full-screen interface",
    )


def tui_possible() -> bool:
    """The full-screen app needs a terminal on both ends and one that can draw."""
    term = os.environ.get("TERM", "")
    return sys.stdin.isatty() and sys.stdout.isatty() and term not in ("", "dumb")


def run(args) -> int:
    if not sys.stdin.isatty():
        print(NEEDS_TERMINAL, file=sys.stderr)
        return 2
    from assistant.session import Session

    session = Session()
    try:
        code = _run_front_end(session, plain=bool(getattr(args, "plain", False)))
    finally:
        session.shutdown()
        leftover = session.take_pending_output()
        if leftover:
            sys.stdout.write(leftover)
            sys.stdout.flush()
    return code


def _run_front_end(session, plain: bool) -> int:
    if not plain and tui_possible():
        try:
            from assistant.tui import run_app
        except ImportError as exc:  # Textual missing or broken: the prompts still work
            print(f"debug-stuck: the full-screen interface cannot start ({exc}); using prompts", file=sys.stderr)
        else:
            return run_app(session)
    from assistant.prompts import run_prompts

    return run_prompts(session)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="debug-stuck", description="The interactive session: pick the job, triage, diagnose, recover."
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    from assistant.errors import run_guarded

    return run_guarded(run, args)


if __name__ == "__main__":
    sys.exit(main())
