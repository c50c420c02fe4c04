"""What every subcommand shares: the parser class, the exit-code help, progress lines, output.

Only argparse and the standard library are imported here: `debug-stuck --help` must answer at once.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional

EXIT_CODES = """exit codes:
  0  a report was written (or the command did what it says)
  1  skills check found problems in the knowledge base
  2  bad usage or bad input (one line on stderr: what, and what is valid)
  3  the target could not be inspected (gone, or permission denied)
  4  stop: processes were still alive after SIGKILL (uninterruptible sleep; listed in the output)
  124  watch: the job stalled and watch ended it (--on-hang stop, or restart gave up)
  128+N  watch: got signal N and passed it on to the job it launched"""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def add_command(subparsers, name: str, run: Callable, **kwargs) -> argparse.ArgumentParser:
    """A subcommand whose `args.run(args)` is `run`; exit codes in its help unless it gives an epilog."""
    kwargs.setdefault("epilog", EXIT_CODES)
    kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
    parser = subparsers.add_parser(name, **kwargs)
    parser.set_defaults(run=run)
    return parser


def progress_printer() -> Optional[Callable[[str], None]]:
    """Progress lines on stderr when a person watches it; None in pipes and CI logs."""
    if not sys.stderr.isatty():
        return None
    return lambda message: print(f"debug-stuck: {message}...", file=sys.stderr)


def emit(text: str, output: Optional[str] = None) -> None:
    """The command's result: on stdout, or written to `output` through the one writer."""
    if not output:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from debug_stuck.errors import BadInput
    from debug_stuck.writer import write_file

    try:
        written = write_file(output, text)
    except OSError as exc:
        raise BadInput(f"cannot write {output}: {exc.strerror or exc}", "give a writable path for --output") from None
    print(f"report written to {written}", file=sys.stderr)


def stdin_is_tty() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def seconds_text(value) -> str:
    return "?" if value is None else f"{float(value):.0f} s"
