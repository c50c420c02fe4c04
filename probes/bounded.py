"""Hard time bounds for calls that may never return on a machine that is already in trouble."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


class CallTimedOut(Exception):
    """The call did not finish within its bound; it may still be running in a daemon thread."""

    def __init__(self, what: str, seconds: float):
        super().__init__(f"{what} did not finish within {seconds:g} s")
        self.what = what
        self.seconds = seconds


def call_with_timeout(fn: Callable[[], T], seconds: float, what: str = "call") -> T:
    """Run fn in a daemon thread and wait at most `seconds` for it.

    A read from a dead NFS mount or a wedged driver cannot be interrupted from Python; running it
    in a daemon thread lets us give up on it and still write a report.
    """
    box: dict = {}

    def runner() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the caller below
            box["error"] = exc

    thread = threading.Thread(target=runner, name=f"bounded:{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise CallTimedOut(what, seconds)
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass
class CommandResult:
    argv: Sequence[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


def kill_process_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_command(
    argv: Sequence[str],
    timeout: float,
    env: dict | None = None,
    cwd: str | None = None,
    input_text: str | None = None,
) -> CommandResult:
    """Run a command in its own process group; at the bound, kill the whole group.

    Raises FileNotFoundError when the program does not exist, so callers can say what to install.
    """
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
        text=True,
        errors="replace",
    )
    try:
        out, err = proc.communicate(input=input_text, timeout=timeout)
        return CommandResult(argv, proc.returncode, out, err, False)
    except subprocess.TimeoutExpired:
        kill_process_group(proc.pid)
        try:
            # A child in uninterruptible sleep may not die at once; do not wait on it forever.
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            out, err = "", ""
        return CommandResult(argv, None, out or "", err or "", True)
