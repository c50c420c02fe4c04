"""Bare `debug-stuck`: the interactive session. The Textual app on a terminal; questionary prompts
with --plain or where the app cannot run; a one-line refusal when stdin is not a terminal."""

from __future__ import annotations

import argparse
import os
import sys

NEEDS_TERMINAL = (
    "debug-stuck: the interactive session needs a terminal; "
    "for scripts and pipes use 'debug-stuck diagnose' (see 'debug-stuck diagnose --help')"
)


ENDED = "debug-stuck: session ended; nothing it started is still running"


def register(parser: argparse.ArgumentParser) -> None:
    """The session's options live on the top-level parser (no subcommand)."""
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
    from debug_stuck.frontends.session.core import Session

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
            from debug_stuck.frontends.tui import run_app
        except ImportError as exc:  # Textual missing or broken: the prompts still work
            print(f"debug-stuck: the full-screen interface cannot start ({exc}); using prompts", file=sys.stderr)
        else:
            code = run_app(session)
            # the full screen is gone: say what the quit did, on the terminal the user is back at
            session.shutdown()
            print(ENDED, file=sys.stderr)
            return code
    from debug_stuck.frontends.prompts import run_prompts

    return run_prompts(session)
