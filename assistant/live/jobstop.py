"""A process stopped by its terminal's job control, told from one stopped by hand (SIGSTOP): it sits in a
background process group of its controlling terminal (probes.collectors.jobcontrol), and its stack says
what it did to the terminal. termios(3): a background process that calls tcsetattr (tty.setraw,
tty.setcbreak), tcflush, tcdrain, tcflow or tcsendbreak on its terminal is sent SIGTTOU; credentials(7)
and the glibc manual's "Access to the Terminal": one that reads the terminal is sent SIGTTIN. SIGCONT
alone wakes it into the same call, which stops it again: it has to be put in the foreground (fg), or run
with its standard input and output away from the terminal."""

from __future__ import annotations

import re
from typing import Optional, Tuple

from debug_stuck.live.hop import Hop
from debug_stuck.live.loops import own_frame_index
from debug_stuck.live.selflock import frame_source

TERMINAL_SETTERS = {"tcsetattr", "tcflush", "tcdrain", "tcflow", "tcsendbreak", "tcsetwinsize", "setraw", "setcbreak"}
TERMINAL_READERS = {"getpass", "unix_getpass", "_raw_input"}
READS_STDIN = re.compile(r"\binput\s*\(|\bsys\.stdin\.(read|readline|readlines)\s*\(|\bgetpass\s*\(")
INNERMOST = 4  # tty.setcbreak -> termios.tcsetattr sit right at the top of the stack


def _stop_signal(hop: Hop) -> Tuple[Optional[str], Optional[str]]:
    """(the stopping signal, the call that drew it) from the stopped thread's frames."""
    python = [f for f in hop.frames if not f.native]  # tty.setcbreak, not libc's tcsetattr under it
    for frame in python[:INNERMOST]:
        function = (frame.function or "").rsplit(".", 1)[-1]
        file = (frame.file or "").rsplit("/", 1)[-1]
        if function in TERMINAL_SETTERS or file in ("tty.py", "termios"):
            return "SIGTTOU", f"{file.removesuffix('.py')}.{function}"
        if function in TERMINAL_READERS or file == "getpass.py":
            return "SIGTTIN", f"getpass.{function}"
    index = own_frame_index(hop.frames)
    frame = hop.frames[index] if index is not None else None
    source = frame_source(frame, hop.pid) if frame is not None and isinstance(frame.line, int) else None
    lines = source.splitlines() if source else []
    read = READS_STDIN.search(lines[frame.line - 1]) if frame is not None and 0 < frame.line <= len(lines) else None
    return ("SIGTTIN", read.group(0).rstrip("( ")) if read else (None, None)


def describe_job_control_stop(hop: Hop, info) -> bool:
    """Say so on the hop when the process is a background job its terminal stopped."""
    if not getattr(info, "tty_background", False):
        return False
    signal, call = _stop_signal(hop)
    hop.facts["end"] = "job-control"
    if signal == "SIGTTOU":
        hop.detail = (
            f"is stopped by its terminal's job control: it runs as a background job and {call} changes the"
            " terminal's settings, so the kernel sent it SIGTTOU"
        )
    elif signal == "SIGTTIN":
        hop.detail = (
            f"is stopped by its terminal's job control: it runs as a background job and reads the terminal"
            f" ({call}), so the kernel sent it SIGTTIN"
        )
    else:
        hop.detail = (
            "is stopped by its terminal's job control: a background job of its terminal, stopped by SIGTTOU or"
            " SIGTTIN (it used the terminal) or SIGTSTP (Ctrl+Z)"
        )
    if signal:
        hop.facts["stop_signal"] = signal
        hop.facts["tty_call"] = call
    return True
