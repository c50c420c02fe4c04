"""Fill a playbook command's named placeholders ({pid}, {log}, ...) with this job's values.

Only the names of contract.PLACEHOLDERS are placeholders: Python f-strings and shell `${VAR}`
stay as written. `{{pid}}` is a literal `{pid}`. In shell blocks a value is quoted when it needs
it, unless the placeholder already sits inside quotes; lists (rank pids) and the launch command
are inserted as they are, to be split by the shell.
"""

from __future__ import annotations

import re
import shlex
from typing import Dict, List, Optional, Tuple

from debug_stuck.contract import PLACEHOLDERS

_NAMES = "|".join(sorted(PLACEHOLDERS, key=len, reverse=True))
PLACEHOLDER = re.compile(r"\{\{(" + _NAMES + r")\}\}|\{(" + _NAMES + r")\}")
SHELL = ("bash", "sh", "shell", "console", "")
UNQUOTED = (
    "launch_command", "rank_pids", "worker_pids", "stopped_pids", "stdin_redirect", "agent_one_node", "stray_cmd",
)  # fmt: skip


def placeholders_in(text: str) -> List[str]:
    return list(dict.fromkeys(m.group(2) for m in PLACEHOLDER.finditer(text) if m.group(2)))


def fill(text: str, values: Dict[str, str], language: str = "bash") -> Tuple[str, List[str]]:
    """(the text with every known placeholder filled, the names left unfilled)."""
    unfilled: List[str] = []

    def replace(match: re.Match) -> str:
        if match.group(1):
            return "{" + match.group(1) + "}"
        name = match.group(2)
        value = values.get(name)
        if value is None or value == "":
            if name not in unfilled:
                unfilled.append(name)
            return match.group(0)
        return filled_value(name, value, text, match.start(), language)

    return PLACEHOLDER.sub(replace, text), unfilled


def filled_value(name: str, value: str, text: str, at: int, language: Optional[str]) -> str:
    """A value as it goes into `text` at `at`: in a shell command, quoted where it needs it (not a
    list of PIDs or the launch command, not inside quotes already)."""
    if language in SHELL and name not in UNQUOTED and not _inside_quotes(text, at):
        return shlex.quote(value)
    return value


def _inside_quotes(text: str, at: int) -> bool:
    line = text[text.rfind("\n", 0, at) + 1 : at]
    return line.count('"') % 2 == 1 or line.count("'") % 2 == 1


PAUSING_READ = re.compile(r"\bpy-spy\s+(dump|top|record)\b[^\n]*?--pid[ =]'?(\d+)\b")


def without_a_pause(text: str, pids) -> str:
    """py-spy commands on a process with a write part-way done read it without pausing it: a pause
    (py-spy's default, and --native, which needs one) makes that write return short and Python drops
    the rest of it (see probes.collectors.stacks.PARTIAL_WRITE_WAITS)."""
    if not pids:
        return text
    lines = []
    for line in text.split("\n"):
        match = PAUSING_READ.search(line)
        if match is not None and int(match.group(2)) in pids and "--nonblocking" not in line:
            line = re.sub(r"\s--native\b", "", line)
            line = re.sub(r"\bpy-spy\s+(dump|top|record)\b", r"py-spy \1 --nonblocking", line, count=1)
        lines.append(line)
    return "\n".join(lines)
