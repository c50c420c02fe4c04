"""Where a prompt's stdin comes from, for the fix that detaches it: `LAUNCH < /dev/null` changes the
stdin the launch command was given. When the pipe the job reads is made inside that command (a
`producer | torchrun ...` line of a launch script, whose producer the script started), that
redirect changes nothing: the fix is in the script, on the line that makes the pipe."""

from __future__ import annotations

from typing import Dict, Optional

LAUNCH, PIPED_INSIDE = "launch", "piped-inside"  # the job's context key "stdin" (advice.applies)


def stdin_writer_inside(peers: list, end: dict, job_pids) -> Optional[dict]:
    """The writer of the pipe the chain's end reads, when a process of the job started it."""
    writer = next((p for p in peers if p.get("mode") in ("w", "rw") and p.get("pid") != end.get("pid")), None)
    return writer if writer is not None and writer.get("ppid") in job_pids else None


def stdin_source(chain, by_pid: Dict[int, dict], raw_wait) -> Optional[str]:
    """`piped-inside` or `launch` for a chain that ends reading stdin; None for any other end.
    `raw_wait(hop, by_pid)`: the wait of a hop's thread as the report holds it."""
    end = (chain or [None])[-1]
    if not end or not (end.get("waits_on") or {}).get("stdin"):
        return None
    peers = raw_wait(end, by_pid).get("peers") or []
    return PIPED_INSIDE if stdin_writer_inside(peers, end, set(by_pid)) else LAUNCH


def stdin_redirect(values: Dict[str, str], peers: list, end: dict, job_pids) -> None:
    """Set `stdin_redirect` (the launch command with stdin from /dev/null) or, when a process of the
    job started the writer of the job's stdin pipe, `stdin_inside` (the sentence that says so).
    `job_pids`: the processes of the job (its launch script among them)."""
    values["stdin_inside"] = ""
    launch = values.get("launch_command")
    if not launch:
        return
    writer = stdin_writer_inside(peers, end, job_pids)
    if writer is not None:
        values["stdin_inside"] = (
            f" The pipe it reads as stdin is made inside `{launch}`: pid {writer['pid']} "
            f"({writer.get('name') or '?'}), started by a process of the job, writes it, so the command's own "
            "stdin does not reach the job. In the script, give the job's command `< /dev/null` in place of that "
            "pipe (or drop the pipe)."
        )
        return
    values["stdin_redirect"] = f"{launch} < /dev/null"
