"""debug_stuck.hook's callbacks inside the real frameworks (issue 16): Lightning's and the HF
Trainer's, three real training steps on the CPU each; the marker names the signal and the
heartbeat holds the last step."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TARGET = Path(__file__).resolve().parents[1] / "targets" / "hooked_frameworks.py"

# The test extra installs both where torch is (Python 3.11 on x86_64): there they must run.
needs_frameworks = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed (the test extra pins it on 3.11 x86_64)"
)


def run(framework: str, tmp_path: Path) -> dict:
    env = dict(os.environ, DEBUG_STUCK_HOOK_DIR=str(tmp_path / "hook"), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, str(TARGET), framework, str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(300)
@needs_frameworks
def test_the_lightning_callback_installs_the_hook_and_beats_each_step(tmp_path):
    seen = run("lightning", tmp_path)
    assert seen["marker"]["signal_name"] == "SIGUSR2"
    assert seen["heartbeat"][1] == "3", seen  # Lightning's global_step after 3 optimizer steps
    assert list((tmp_path / "hook").iterdir()) == [], "the hook's files outlived the job"


@pytest.mark.timeout(300)
@needs_frameworks
def test_the_hf_trainer_callback_installs_the_hook_and_beats_each_step(tmp_path):
    seen = run("hf", tmp_path)
    assert seen["marker"]["signal_name"] == "SIGUSR2"
    assert seen["heartbeat"][1] == "3", seen
    assert list((tmp_path / "hook").iterdir()) == [], "the hook's files outlived the job"
