"""The process left running in the background that holds open a pipe the job reads to its end.

`subprocess.run(cmd, capture_output=True)` (communicate()) reads its child's stdout and stderr until
end-of-file, which comes only when every holder of the pipe's write end has closed it (pipe(7)). A
command that starts a process in the background (`sleep 3600 &`, a monitor, a server) and exits
leaves that process holding the pipe it inherited (fork(2)): the job's read never ends. The chain ends
at such a process (live.pipeholders took it into the job); this names it for the fix.
"""

from __future__ import annotations

import re
import shlex
from typing import Callable, Dict, List, Optional

from debug_stuck.advice.facts import command_argv

READS_TO_THE_END = ("poll", "pipe")


def background_holder(values: Dict[str, str], processes: dict, chain: List[dict]) -> None:
    """`stray_pid`, `stray_cmd` (its command line, as a shell command), `stray_short` (its program)
    and `stray_started_by` (" by pid N, which has exited": the job's child it outlived) when the chain
    goes from a read of a pipe (or a poll on pipes) to a process taken into the job for the pipe it
    holds (`adopted_by`): no child of the job, its parent outside the job's processes (re-parented to
    init or a subreaper once that child exited)."""
    if len(chain) < 2:
        return
    first, end = chain[0], chain[-1]
    waits = first.get("waits_on") or {}
    if waits.get("kind") not in READS_TO_THE_END or waits.get("op") not in ("read", "poll"):
        return
    stray = processes.get(end.get("pid")) or {}
    # only a process live.pipeholders took in for the pipe it holds: never the job's own processes
    if (
        not stray
        or stray.get("adopted_by") is None
        or stray.get("ppid") in processes
        or end.get("pid") == first.get("pid")
    ):
        return
    argv = command_argv(stray.get("cmdline"))
    if not argv:
        return
    values["stray_pid"] = str(end["pid"])
    values["stray_cmd"] = shlex.join(argv)
    values["stray_short"] = argv[0].rsplit("/", 1)[-1]
    exited = [
        pid
        for pid, p in processes.items()
        if p.get("ppid") == first.get("pid") and p.get("state") == "Z" and pid != end.get("pid")
    ]
    values["stray_started_by"] = (
        f" by pid {exited[0]}, the child {values['first_who']} started, which has exited" if exited else ""
    )


def filter_child(values: Dict[str, str], processes: dict, chain: List[dict], raw_wait: dict) -> None:
    """`filter_pid` and `filter_short` when the chain's first process is blocked writing a pipe that
    its own child reads, and the chain goes round (the child waits on it in turn): the job writes all
    of a filter child's input before reading its output, and the child, its stdout pipe full, no
    longer reads (Python docs, subprocess: use communicate())."""
    if len(chain) < 2 or (chain[-1].get("waits_on") or {}).get("kind") != "cycle":
        return
    first = chain[0]
    waits = first.get("waits_on") or {}
    if waits.get("kind") != "pipe" or waits.get("op") != "write":
        return
    readers = [p.get("pid") for p in raw_wait.get("peers") or [] if p.get("mode") in ("r", "rw")]
    child = next((pid for pid in readers if (processes.get(pid) or {}).get("ppid") == first.get("pid")), None)
    if child is None:
        return
    argv = command_argv((processes.get(child) or {}).get("cmdline"))
    values["filter_pid"] = str(child)
    values["filter_short"] = argv[0].rsplit("/", 1)[-1] if argv else "its child"


FLUSHES = re.compile(r"\.flush\(\)|\bflush\s*=\s*True\b")


def child_flushes(
    values: Dict[str, str], processes: dict, chain: List[dict], source: Callable[[dict], Optional[str]]
) -> None:
    """`child_flushes` when the chain goes round between a process and its child over their pipes and
    the child sends unbuffered: `-u` or PYTHONUNBUFFERED in its command line or environment, or a
    flush in the source file of its waiting frame (`out.flush()`, `print(..., flush=True)`). Its reply
    then sits in no buffer: it is shorter than what the reader waits for."""
    if len(chain) < 3 or (chain[-1].get("waits_on") or {}).get("kind") != "cycle":
        return
    child = processes.get(chain[-2].get("pid")) or {}
    argv = command_argv(child.get("cmdline"))
    flags = [a for a in argv[1:3] if a.startswith("-")]
    ignores_env = any(f in ("-I", "-E") for f in flags)  # isolated mode: PYTHON* variables are ignored
    from_env = not ignores_env and (child.get("env") or {}).get("PYTHONUNBUFFERED") not in (None, "", "0")
    unbuffered = "-u" in flags or from_env
    if unbuffered or FLUSHES.search(source(chain[-2]) or ""):
        values["child_flushes"] = "yes"


SENDALL = re.compile(r"([A-Za-z_][\w.]*)\.(?:sendall|send|write)\(([^()]*)\)")


def both_send(values: Dict[str, str], chain: List[dict], source_line: Callable[[dict], Optional[str]]) -> None:
    """`send_sock` and `send_data` (the job's own send as it writes it, `sock.sendall(mine)`) when every
    hop of the chain sends on a socket to the next and the chain goes round: both ends of a connection
    send before either reads, each waiting for the other to read (socket(7): a send blocks while the
    other end's buffers are full)."""
    if len(chain) < 3 or (chain[-1].get("waits_on") or {}).get("kind") != "cycle":
        return
    hops = chain[:-1]
    if any((h.get("waits_on") or {}).get("kind") != "socket" for h in hops):
        return
    if any((h.get("waits_on") or {}).get("op") not in ("send", "write") for h in hops):
        return
    found = SENDALL.search((source_line(hops[0]) or "").split("#", 1)[0])
    values["send_sock"], values["send_data"] = (found.group(1), found.group(2)) if found else ("sock", "data")


def endless_values(values: Dict[str, str], process: dict, waits: dict) -> None:
    """`endless_cmd`, `endless_bound` and, where the table says which flags bound it, `endless_argv` (its
    command line with them added) for a chain that ends at a child running a command that never ends
    on its own (live.endless)."""
    from debug_stuck.live.endless import endless_entry

    if waits.get("end") != "runs-forever":
        return
    argv = command_argv(process.get("cmdline"))
    entry = endless_entry(argv)
    if entry is None:
        return
    values["endless_cmd"] = shlex.join(argv)[:120]
    values["endless_bound"] = str(entry.get("bound") or "a flag that bounds it")
    if entry.get("add"):
        values["endless_argv"] = repr([*argv, *entry["add"]])
