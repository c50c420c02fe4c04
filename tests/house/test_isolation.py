"""Children debug-stuck starts never import from the user's directory.

The tests run them from a directory that holds packages and modules named like the ones they
import (`probes/`, `assistant/`, `pystack/`, `json.py`, `_common.py`...), each of which, if
imported, records it in a marker file and fails. An ML repository with a `probes/` folder of
linear probes is the everyday case.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from installed import installed_script

from conftest import REPO
from debug_stuck.live.nodes import remote_argv, snapshot_arguments

HOSTILE_NAMES = ("probes", "assistant", "debug_stuck_helpers", "pystack", "yaml", "psutil")
HOSTILE_MODULES = ("json", "_common", "runpy", "sitecustomize", "usercustomize")

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def hostile(tmp_path) -> Path:
    """A directory whose every module says so when imported (and then refuses)."""
    root = tmp_path / "ml-repo"
    root.mkdir()
    trap = (
        "import os\n"
        f"with open(os.path.join({str(root)!r}, 'IMPORTED'), 'a') as fh:\n"
        "    fh.write(__name__ + '\\n')\n"
        "raise ImportError('imported from the user directory: ' + __name__)\n"
    )
    for name in HOSTILE_NAMES:
        (root / name).mkdir()
        (root / name / "__init__.py").write_text(trap)
    for name in HOSTILE_MODULES:
        (root / f"{name}.py").write_text(trap)
    return root


def imported(root: Path) -> str:
    marker = root / "IMPORTED"
    return marker.read_text() if marker.exists() else ""


def debug_stuck_command() -> list:
    """The console script, as a user runs it (its own directory is first on sys.path, not ours)."""
    exe = installed_script()
    assert exe, "debug-stuck is not installed: pip install -e ."
    return [exe]


@pytest.fixture
def sleeper(session_job):
    code = "import time; print('ready', flush=True); time.sleep(120)"
    proc = session_job([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    return proc


def test_a_probe_run_by_the_session_imports_nothing_from_here(hostile, monkeypatch, sleeper):
    from debug_stuck.frontends.session.core import Session

    monkeypatch.chdir(hostile)
    session = Session(pids=[sleeper.pid])
    session.pids = [sleeper.pid]
    outcome = session.run_probe("env")
    assert outcome.status in ("ok", "warn", "fail"), outcome.summary
    assert outcome.result and outcome.result["name"] == "env"
    assert imported(hostile) == ""


def test_the_remote_snapshot_collector_imports_nothing_from_its_directory(hostile, sleeper):
    argv = remote_argv(snapshot_arguments([sleeper.pid], window=0.2, native=False))
    proc = subprocess.run(argv, cwd=hostile, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wire = json.loads(proc.stdout.strip().splitlines()[-1])
    assert wire["format"] and [p["pid"] for p in wire["processes"]] == [sleeper.pid]
    assert imported(hostile) == ""


@pytest.mark.skipif(importlib.util.find_spec("pystack") is None, reason="pystack is not installed")
def test_the_pystack_reader_imports_nothing_from_here(hostile, monkeypatch, sleeper):
    from debug_stuck.probes.collectors import stacks

    monkeypatch.chdir(hostile)
    threads = stacks._pystack_threads(sleeper.pid, False, time.monotonic() + 60, 60, [])
    assert threads and any(f.function == "<module>" for t in threads for f in t.frames)
    assert imported(hostile) == ""


def test_the_cli_and_its_probe_children_from_here(hostile, sleeper):
    version = subprocess.run([*debug_stuck_command(), "--version"], cwd=hostile, capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("debug-stuck ")
    probe = subprocess.run(
        [*debug_stuck_command(), "probe", "env", "--pid", str(sleeper.pid), "--format", "json"],
        cwd=hostile,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout)["name"] == "env"
    assert imported(hostile) == ""


def test_the_demo_jobs_import_nothing_from_here(hostile):
    demo = subprocess.run(
        [*debug_stuck_command(), "demo", "deadlock", "--format", "json"],
        cwd=hostile,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert json.loads(demo.stdout)["verdict"]["cause"] == "thread-deadlock"
    assert imported(hostile) == ""


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_the_dataloader_probe_runner_imports_only_the_users_factory(hostile, monkeypatch):
    """The runner imports the factory from the user's folders on purpose; nothing else of theirs."""
    from debug_stuck.probes.targeted.base import ProbeContext
    from debug_stuck.probes.targeted.registry import run_probe

    monkeypatch.chdir(hostile)
    targets = REPO / "tests" / "targets"
    ctx = ProbeContext(
        timeout=60, allow_exec=True, factory="probe_datasets:fast", paths=[str(targets)], batches=2, num_workers=0
    )
    result = run_probe("dataloader", ctx)
    assert result.status == "ok", result.summary
    assert imported(hostile) == ""


def test_children_use_the_isolating_prologue():
    """No child of ours runs `python -m` or `python -c` without it (a new one would be caught here)."""
    offenders = []
    for path in list((REPO / "assistant").rglob("*.py")) + list((REPO / "probes").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            isolated = '"-I"' in line  # -I: no user directory on sys.path (and no site-packages needed)
            if "sys.executable" in line and ('"-c"' in line or '"-m"' in line) and not isolated:
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    # interpreter.py is the prologue; the zoo's jobs run in a private temp dir of their own
    allowed = {"assistant/interpreter.py", "assistant/zoo/spawn.py"}
    assert [o for o in offenders if o.split(":")[0] not in allowed] == []
    assert os.path.exists(REPO / "assistant" / "interpreter.py")
