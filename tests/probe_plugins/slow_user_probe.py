"""A probe for the session's probe-runner tests: it runs "user code" (a long `sleep`, started the
way real probes start commands: probes.bounded.run_command, in a session of its own) and takes
as long as it is allowed to, so that consent, progress and cancel can be tested on a real tree
of processes."""

from __future__ import annotations

from probes.bounded import run_command
from probes.targeted import ProbeContext, ProbeResult

NAME = "slow-user-code"
SUMMARY = "runs your command (default: sleep 600) until its time limit (tests only)"
DEFAULT_TIMEOUT = 300.0
RUNS_USER_CODE = True


def run(ctx: ProbeContext) -> ProbeResult:
    command = ctx.command or ["sleep", "600"]
    result = run_command(command, timeout=ctx.timeout)
    if result.timed_out:
        return ProbeResult(NAME, "timeout", f"{' '.join(command)} did not finish within {ctx.timeout:g} s")
    return ProbeResult(NAME, "ok", f"{' '.join(command)} exited with {result.returncode}")
