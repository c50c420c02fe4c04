"""The process left running in the background that holds open a pipe the job reads to its end.

`subprocess.run(cmd, capture_output=True)` (communicate()) reads its child's stdout and stderr until
end-of-file, which comes only when every holder of the pipe's write end has closed it (pipe(7)). A
command that starts a process in the background (`sleep 3600 &`, a monitor, a server) and exits
leaves that process holding the pipe it inherited (fork(2)): the job's read never ends. The chain ends
at such a process (live.pipeholders took it into the job); this names it for the fix.
"""

from __future__ import annotations

import shlex
from typing import Dict, List

READS_TO_THE_END = ("poll", "pipe")


def background_holder(values: Dict[str, str], processes: dict, chain: List[dict]) -> None:
    """`stray_pid`, `stray_cmd` (its command line, as a shell command), `stray_short` (its program)
    and `stray_started_by` (" by pid N, which has exited": the job's child it outlived) when the chain
    goes from a read of a pipe (or a poll on pipes) to a process that is no child of the job: its
    parent is outside the job's processes (re-parented to init or a subreaper once that child exited)."""
    if len(chain) < 2:
        return
    first, end = chain[0], chain[-1]
    if (first.get("waits_on") or {}).get("kind") not in READS_TO_THE_END:
        return
    stray = processes.get(end.get("pid")) or {}
    if not stray or stray.get("ppid") in processes:
        return
    cmdline = stray.get("cmdline") or []
    argv = shlex.split(cmdline) if isinstance(cmdline, str) else list(cmdline)
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
