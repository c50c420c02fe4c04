"""A probe for the session's probe-runner tests: it runs "user code" (a long `sleep`, started the
way real probes start commands: debug_stuck.bounded.run_command, in a session of its own) and takes
as long as it is allowed to, so that consent, progress and cancel can be tested on a real tree
of processes."""

from __future__ import annotations

from debug_stuck.bounded import run_command
from debug_stuck.probes.targeted.base import ProbeContext, ProbeResult
from debug_stuck.probes.targeted.registry import ProbeSpec

NAME = "slow-user-code"
SPEC = ProbeSpec(
    name=NAME,
    module="slow_user_probe",
    summary="runs your command (default: sleep 600) until its time limit (tests only)",
    timeout=300.0,
    runs_user_code=True,
    inputs=("command",),
    ask=("command", "a command to run (default: sleep 600)"),
)


def run(ctx: ProbeContext) -> ProbeResult:
    command = ctx.command or ["sleep", "600"]
    result = run_command(command, timeout=ctx.timeout)
    if result.timed_out:
        return ProbeResult(NAME, "timeout", f"{' '.join(command)} did not finish within {ctx.timeout:g} s")
    return ProbeResult(NAME, "ok", f"{' '.join(command)} exited with {result.returncode}")
