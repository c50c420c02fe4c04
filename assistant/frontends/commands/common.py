"""What every subcommand shares: the parser class, the exit-code help, progress lines, output.

Only argparse and the standard library are imported here: `debug-stuck --help` must answer at once.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Callable, Optional

EXIT_CODES = """exit codes:
  0  a report was written (or the command did what it says); stacks that may not be read
     (no ptrace rights) still give a report, with what is missing
  1  skills check found problems in the knowledge base; stop: not stopped (answered no)
  2  bad usage or bad input (one line on stderr: what, and what is valid); watch: a stop or
     restart was refused because the incident report could not be written
  3  the target could not be inspected (gone, a zombie, not a Python process, not a training job)
  4  stop: processes were still alive after SIGKILL (uninterruptible sleep; listed in the output)
  124  watch: the job stalled and watch ended it (--on-hang stop, or restart gave up)
  128+N  watch: got signal N and passed it on to the job it launched; any other command:
     interrupted by signal N (130 Ctrl-C, 143 SIGTERM) after ending what it started"""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


MAX_PID = 2**31 - 1  # pid_t; a PID above the kernel's pid_max is left to say "does not exist" (exit 3)


def pid_number(text: str) -> int:
    """argparse type of every --pid: a positive integer (0 and negatives are signal groups to the kernel)."""
    try:
        value = int(text, 10)
    except ValueError:
        value = None
    if value is None or not 1 <= value <= MAX_PID:
        raise argparse.ArgumentTypeError(f"{text!r} is not a process id; give a positive PID, as ps -ef shows it")
    return value


def number(low: float = -math.inf, high: float = math.inf, above: bool = False, unit: str = "seconds"):
    """argparse type of a float option: finite (nan and inf compare false with every bound) and
    within [low, high] (above: more than low). Without bounds only finiteness is checked here; the
    command checks its range."""
    if math.isinf(low) and math.isinf(high):
        valid = "a finite number"
    elif math.isinf(high):
        valid = f"{unit} {'over' if above else 'from'} {low:g}"
    else:
        valid = f"{unit} {'over' if above else 'from'} {low:g} {'and at most' if above else 'to'} {high:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number; give {valid}") from None
        if not math.isfinite(value) or value < low or value > high or (above and value == low):
            raise argparse.ArgumentTypeError(f"{text} is out of range; give {valid}")
        return value

    return parse


window_seconds = number(0, 60, above=True)  # --window: between the stack samples


def count(low: int, high: int, unit: str):
    """argparse type of an integer option within [low, high]."""
    valid = f"{low} to {high} {unit}"

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give {valid}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is too {'small' if value < low else 'large'}; give {valid}")
        return value

    return parse


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
