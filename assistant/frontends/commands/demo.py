"""`debug-stuck demo`: start a bundled job that really hangs, diagnose it live, clean up."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Optional

from debug_stuck.errors import BadInput
from debug_stuck.frontends.commands.common import add_command


@dataclass(frozen=True)
class Scenario:
    program: str  # a program of assistant/zoo
    title: str
    needs_torch: bool = False
    options: Dict[str, str] = field(default_factory=dict)


SCENARIOS: Dict[str, Scenario] = {
    "straggler": Scenario(
        "gloo_straggler", "torchrun, 2 gloo ranks: rank 1 stalls loading data, rank 0 waits in all_reduce", True
    ),
    "dataloader": Scenario("dataloader_io", "a DataLoader worker blocked reading in __getitem__", True),
    "rendezvous": Scenario("rendezvous_missing_rank", "init_process_group waits for a rank that never starts", True),
    "checkpoint": Scenario("torch_save_blocked", "torch.save blocked on its destination", True),
    "healthy": Scenario("healthy", "a job that is making progress (the verdict must say so)", True),
    "deadlock": Scenario("lock_deadlock", "two threads take two locks in opposite order"),
    "future": Scenario("future_result", "the main thread waits forever on future.result()"),
    "spin": Scenario("native_spin", "a native loop (regex backtracking) that never returns"),
    "gc": Scenario("gc_heavy", "a process spending its time in gc.collect()"),
    "pipe": Scenario("stdout_pipe", "blocked writing to a stdout pipe nobody reads", options={"stdout": "pipe"}),
}


# The scenario `demo` runs when none is named: the distributed one where PyTorch is installed, a
# pure-Python one where it is not. `demo --help`, `demo --list` and `demo` all read these.
DEFAULT_WITH_TORCH = "straggler"
DEFAULT_WITHOUT_TORCH = "deadlock"


def torch_available() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a broken or stubbed-out torch counts as none
        return False


def default_scenario() -> str:
    return DEFAULT_WITH_TORCH if torch_available() else DEFAULT_WITHOUT_TORCH


def scenario_help() -> str:
    """The SCENARIO argument's help: the default this installation runs, then the rule."""
    here, other = default_scenario(), (DEFAULT_WITHOUT_TORCH if torch_available() else DEFAULT_WITH_TORCH)
    where = "without PyTorch" if torch_available() else "with PyTorch installed"
    return f"which hang (see --list; default here: {here}; {other} {where})"


def pure_python_scenarios() -> list:
    return [name for name, sc in SCENARIOS.items() if not sc.needs_torch]


def list_scenarios() -> str:
    have_torch = torch_available()
    lines = []
    for name, sc in SCENARIOS.items():
        note = "" if not sc.needs_torch or have_torch else "  (needs torch: pip install torch)"
        lines.append(f"{name:12} {sc.title}{note}")
    lines.append(f"default: {default_scenario()}")
    return "\n".join(lines) + "\n"


def run_demo(name: Optional[str], render: Callable, say: Callable[[str], None], window: float = 1.0) -> str:
    """Start the scenario, diagnose it, always stop it; return the rendered report."""
    from debug_stuck.pipeline import DiagnoseRequest, diagnose
    from debug_stuck.zoo import spawn

    name = name or default_scenario()
    scenario = SCENARIOS.get(name)
    if scenario is None:
        raise BadInput(f"no demo scenario {name!r}", f"valid: {', '.join(SCENARIOS)} (see 'debug-stuck demo --list')")
    if scenario.needs_torch and not torch_available():
        raise BadInput(
            f"demo {name!r} needs PyTorch",
            "pip install torch, or pick a pure-Python one: " + ", ".join(pure_python_scenarios()),
        )
    workdir = Path(tempfile.mkdtemp(prefix="debug-stuck-demo-"))
    jobs = []
    try:
        say(f"starting the demo job '{name}': {scenario.title}")
        job = spawn.start(scenario.program, workdir, on_spawn=jobs.append, **scenario.options)
        say(f"job running (pid {job.proc.pid}); diagnosing it live")
        report = diagnose(DiagnoseRequest(pids=[job.proc.pid], window=window, progress=say, resume_pid=job.proc.pid))
        return render(report)
    finally:
        for job in jobs:
            count = len(job.pids())
            job.stop()
            say(f"stopped the demo job ({count} process(es)), by process group and PID")
        shutil.rmtree(workdir, ignore_errors=True)


def stderr_say(message: str) -> None:
    print(f"debug-stuck: {message}", file=sys.stderr, flush=True)


def register(subparsers) -> None:
    m = add_command(
        subparsers,
        "demo",
        run,
        help="start a bundled job that really hangs, diagnose it live, clean up",
        description="Start a bundled job that really hangs, diagnose it live, show the report, clean up.",
    )
    m.add_argument(
        "scenario",
        nargs="?",
        metavar="SCENARIO",
        help=scenario_help(),
    )
    m.add_argument("--list", action="store_true", help="list the scenarios")
    m.add_argument("--format", choices=("json", "markdown", "text"), default="text")


def run(args) -> int:
    from debug_stuck.render import render

    if args.list:
        sys.stdout.write(list_scenarios())
        return 0
    text = run_demo(args.scenario, lambda report: render(report, args.format), stderr_say)
    sys.stdout.write(text)
    return 0
