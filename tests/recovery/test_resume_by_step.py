"""`resume` picks the checkpoint furthest in training (the highest step), not the
file written last. A copy (`cp`, a restore) resets file times; the step read from inside the file
(or its name) is what counts, file time breaks ties only, and a file whose step cannot be read
ranks after every file whose step is known.

Real torch.save files, real `cp`, a real process for `--pid`; file times are then set explicitly
(as a copy leaves them) so that no test depends on the file system's timestamp resolution.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import ckpt_layouts as L  # noqa: E402

from conftest import run_subprocess  # noqa: E402
from debug_stuck.recovery.plan import plan_resume, plan_resume_for_pid  # noqa: E402

SCRIPT = """\
import argparse, torch
p = argparse.ArgumentParser()
p.add_argument("--save_dir", default="ckpts")
p.add_argument("--resume", type=str, default="", help="checkpoint to resume from")
args = p.parse_args()
"""
CMD = ["python", "train.py", "--save_dir", "ckpts"]


def _job(tmp_path: Path) -> Path:
    """The job's folder (tmp_path/job, its checkpoints in ckpts/); originals live beside it in backup/."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.py").write_text(SCRIPT)
    return job / "ckpts"


def _copy(src: Path, dst: Path) -> Path:
    """A real `cp` (no -p): the copy gets a fresh file time, its contents (the step) stay."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", str(src), str(dst)], check=True, timeout=30)
    return dst


def test_after_a_copy_the_higher_step_wins_over_the_newer_file(tmp_path):
    saved = tmp_path / "backup"
    step10 = L.torch_file(saved / "model_a.pt", {"step": 10, "w": torch.ones(2)})
    step20 = L.torch_file(saved / "model_b.pt", {"step": 20, "w": torch.ones(2)})
    ckpts = _job(tmp_path)
    b = _copy(step20, ckpts / "model_b.pt")
    a = _copy(step10, ckpts / "model_a.pt")  # copied last: the newest file time
    L.age([b, a])

    plan = plan_resume(CMD, str(tmp_path / "job"), {})

    assert plan.checkpoint.path == str(b) and plan.checkpoint.step == 20
    assert plan.argv == CMD + ["--resume", str(b)]
    assert plan.lost == "steps after 20"
    assert plan.skipped == []


def test_a_last_pt_copied_from_step_10_does_not_beat_step_20(tmp_path):
    ckpts = _job(tmp_path)
    early = L.torch_file(ckpts / "ckpt_step10.pt", {"global_step": 10, "w": torch.ones(2)})
    step20 = L.torch_file(ckpts / "ckpt_step20.pt", {"global_step": 20, "w": torch.ones(2)})
    last = _copy(early, ckpts / "last.pt")
    L.age([early, step20, last])

    plan = plan_resume(CMD, str(tmp_path / "job"), {})

    assert plan.checkpoint.path == str(step20) and plan.checkpoint.step == 20


def test_time_breaks_ties_between_files_of_the_same_step(tmp_path):
    ckpts = _job(tmp_path)
    named = L.torch_file(ckpts / "ckpt_step20.pt", {"global_step": 20, "w": torch.ones(2)})
    last = _copy(named, ckpts / "last.pt")
    L.torch_file(ckpts / "ckpt_step10.pt", {"global_step": 10})
    L.age([named, last])
    assert plan_resume(CMD, str(tmp_path / "job"), {}).checkpoint.path == str(last)
    L.age([last, named])
    assert plan_resume(CMD, str(tmp_path / "job"), {}).checkpoint.path == str(named)


def test_unknown_steps_rank_after_known_ones_and_by_time_among_themselves(tmp_path):
    ckpts = _job(tmp_path)
    # legacy-format files: their step cannot be read without unpickling, and their names carry none
    old = L.torch_file(ckpts / "weights_a.pt", {"step": 99}, legacy=True)
    new = L.torch_file(ckpts / "weights_b.pt", {"step": 1}, legacy=True)
    L.age([old, new])
    assert plan_resume(CMD, str(tmp_path / "job"), {}).checkpoint.path == str(new)

    known = L.torch_file(ckpts / "model.pt", {"step": 5})
    L.age([known, old, new])  # the known step is the oldest file: it still ranks first
    plan = plan_resume(CMD, str(tmp_path / "job"), {})
    assert plan.checkpoint.path == str(known) and plan.checkpoint.step == 5


def test_a_broken_higher_step_is_skipped_and_named(tmp_path):
    ckpts = _job(tmp_path)
    good = L.torch_file(ckpts / "ckpt_step20.pt", {"global_step": 20})
    broken = L.truncate(L.torch_file(ckpts / "ckpt_step30.pt", {"global_step": 30}))
    copied = _copy(L.torch_file(tmp_path / "backup" / "ckpt_step10.pt", {"global_step": 10}), ckpts / "ckpt_step10.pt")
    L.age([broken, good, copied])  # the broken step 30 is the oldest file; step 10 the newest

    plan = plan_resume(CMD, str(tmp_path / "job"), {})

    assert plan.checkpoint.path == str(good)
    assert [c.path for c in plan.skipped] == [str(broken)]
    assert plan.skipped[0].problem == "truncated: zip central directory missing"


@pytest.mark.timeout(60)
def test_the_cli_reports_the_highest_step(tmp_path):
    ckpts = _job(tmp_path)
    step20 = L.torch_file(ckpts / "model_b.pt", {"step": 20})
    step10 = _copy(L.torch_file(tmp_path / "backup" / "model_a.pt", {"step": 10}), ckpts / "model_a.pt")
    L.age([step20, step10])
    proc = run_subprocess("resume", "--cmd", shlex.join(CMD), "--dir", tmp_path / "job", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["checkpoint"] == str(step20) and data["lost"] == "steps after 20"


LIVE_JOB = """\
import os, shutil, time, torch
os.makedirs("ckpts", exist_ok=True)
torch.save({"global_step": 20, "w": torch.ones(2)}, "ckpts/ckpt_step20.pt")
torch.save({"global_step": 10, "w": torch.ones(2)}, "ckpts/ckpt_step10.pt")
shutil.copyfile("ckpts/ckpt_step10.pt", "ckpts/last.pt")
old = time.time() - 3600
os.utime("ckpts/ckpt_step20.pt", (old, old))  # as a restore from a backup leaves it
os.utime("ckpts/ckpt_step10.pt", (old, old))
open("ready", "w").close()
time.sleep(120)
"""


@pytest.fixture
def live(tmp_path, session_job):
    def start() -> subprocess.Popen:
        (tmp_path / "train.py").write_text(SCRIPT + LIVE_JOB)
        proc = session_job([sys.executable, "train.py", "--save_dir", "ckpts"], cwd=tmp_path)
        deadline = time.monotonic() + 45
        while not (tmp_path / "ready").exists():
            assert proc.poll() is None, "the job exited before writing its checkpoints"
            assert time.monotonic() < deadline, "the job did not write its checkpoints"
            time.sleep(0.1)
        return proc

    return start


@pytest.mark.timeout(90)
def test_resume_pid_of_a_live_job_picks_the_highest_step(live, tmp_path):
    proc = live()
    plan = plan_resume_for_pid(proc.pid)
    assert plan.checkpoint.path == str(tmp_path / "ckpts" / "ckpt_step20.pt")
    assert plan.checkpoint.step == 20 and plan.lost == "steps after 20"
