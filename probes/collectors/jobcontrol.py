"""Whether a stopped process sits in a background process group of its controlling terminal: then the
terminal's job control most likely stopped it (SIGTTOU for a background job that changes the terminal's
settings, or writes to it under `stty tostop`; SIGTTIN for one that reads it; SIGTSTP for Ctrl+Z, after
which the shell puts another group in the foreground), not a SIGSTOP sent by hand.

proc(5), /proc/PID/stat: field 5 pgrp, field 7 tty_nr (0: no controlling terminal), field 8 tpgid (the
foreground process group of that terminal, -1 when none). termios(3) / credentials(7): a process whose
group is not the terminal's foreground group is a background job. Every read is bounded."""

from __future__ import annotations

from debug_stuck.probes.collectors.procfs import bounded_read, read_text


def in_background_of_its_terminal(pid: int) -> bool:
    text = bounded_read(lambda: read_text(f"/proc/{pid}/stat", 4096), f"/proc/{pid}/stat") or ""
    fields = text.rsplit(")", 1)[-1].split()
    # fields[0] is field 3 (state): pgrp is fields[2], tty_nr fields[4], tpgid fields[5]
    if len(fields) < 6 or not all(f.lstrip("-").isdigit() for f in fields[2:6]):
        return False
    pgrp, tty_nr, tpgid = int(fields[2]), int(fields[4]), int(fields[5])
    return tty_nr != 0 and tpgid > 0 and tpgid != pgrp
