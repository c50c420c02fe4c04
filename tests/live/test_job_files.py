"""The files a job holds open, read as the job sees them: its log through /proc/P/fd/N (never its
path again, which may name another file in our mount namespace), and any file it appends to during
the window counted as progress."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import run_subprocess


def needs_torch():
    pytest.importorskip("torch")


needs_root_unshare = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare for a private mount namespace"
)

JOB = """
import sys, time
print("step 1 loss 0.5", flush=True)
print("ready", file=sys.stderr, flush=True)
time.sleep(600)
"""


@needs_root_unshare
@pytest.mark.timeout(120)
def test_a_log_in_a_private_mount_namespace_is_read_as_the_job_sees_it(tmp_path, session_job):
    """The job's stdout is <dir>/out.log on a tmpfs only its namespace sees; in ours the same path
    is a root-only file. The report must show the job's line, never the root-only file."""
    folder = tmp_path / "m"
    folder.mkdir()
    secret = folder / "out.log"
    secret.write_text("ROOT ONLY: do not show this line\n")
    secret.chmod(0o600)
    script = tmp_path / "job.py"
    script.write_text(JOB)
    inner = f"mount -t tmpfs none {folder} && exec {sys.executable} {script} > {folder}/out.log"
    unshare = ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner]
    proc = session_job(unshare, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "ready"
    result = run_subprocess("diagnose", "--pid", proc.pid, "--format", "json", timeout=90)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    logs = {entry["path"]: entry for entry in report["logs"]}
    entry = logs[str(folder / "out.log")]
    assert entry["read_from"] == f"/proc/{proc.pid}/fd/1"
    assert entry["last_line"] == "step 1 loss 0.5"
    assert "ROOT ONLY" not in result.stdout

    # watch --pid follows the same log the same way
    from debug_stuck.actions.watch.follow import LogFollower
    from debug_stuck.actions.watch.job import attach

    job = attach(proc.pid)
    path = str(folder / "out.log")
    assert job.logs == [path] and job.read_paths[path] == f"/proc/{proc.pid}/fd/1"
    lines, grew = LogFollower(path, read_path=job.read_paths[path]).read(final=True)
    assert lines == ["step 1 loss 0.5"] and grew


@pytest.mark.timeout(180)
def test_a_job_that_appends_to_a_file_it_holds_open_is_progressing(zoo):  # noqa: F811
    """0.25 s of compute and 0.15 s of sleep per step, a line per step to train.log (held open),
    nothing on stdout: its stacks only turn in place, the growing file is the progress."""
    job = zoo("file_logger", stdout="pipe")
    result = run_subprocess("diagnose", "--pid", job.proc.pid, "--window", "2", "--format", "json", timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    verdict = report["verdict"]
    assert verdict["hung"] is False and verdict["state"] == "progressing", verdict
    assert "train.log" in verdict["summary"] or any("train.log" in log["path"] for log in report["logs"])
    # and its own log is read as a log: the step lines are there
    train_log = next(log for log in report["logs"] if log["path"].endswith("train.log"))
    assert train_log["last_line"].startswith("step ")


@pytest.mark.timeout(180)
def test_a_hung_save_leaves_the_valid_checkpoint_alone(zoo):  # noqa: F811
    """Blocked in torch.save on ckpt_000010.pt (a FIFO) after a complete ckpt_000005.pt: resume
    starts from ckpt_000005.pt, so no fix may move or remove it; the partial file is the FIFO."""
    needs_torch()
    job = zoo("torch_save_blocked", args=["--after-good-save"])
    good = str(job.workdir / "ckpt_000005.pt")
    partial = str(job.workdir / "ckpt_000010.pt")
    result = run_subprocess("diagnose", "--pid", job.proc.pid, "--format", "json", timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["resume"]["checkpoint"] == good, report["resume"]
    destructive = ("mv ", "rm ", "unlink", "os.remove", "shutil.move")
    for diagnosis in report["diagnoses"]:
        for fix in diagnosis["fixes"]:
            for command in fix["commands"]:
                if any(verb in command for verb in destructive):
                    assert good not in command, (fix["title"], command)
    save = next(d for d in report["diagnoses"] if d["cause"] == "checkpoint-save")
    removal = next(f for f in save["fixes"] if f["title"].startswith("Remove the partial file"))
    assert any(partial in c and c.startswith("mv ") for c in removal["commands"]), removal["commands"]


def test_no_written_file_of_a_tracker_process_counts_for_the_trainer(tmp_path, session_job):
    """Files held by processes that are not trainers (a tracker's service child) are not the job's
    progress: job_files keeps only the writers it is given."""
    from debug_stuck.probes.collectors.jobfiles import job_files

    path = tmp_path / "service.log"
    code = f"f = open({str(path)!r}, 'a'); print('ready', flush=True); import time; time.sleep(60)"
    proc = session_job([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    written = [f.path for f in job_files([proc.pid]) if f.role == "written"]
    assert str(path) in written
    assert not [f for f in job_files([proc.pid], writers=[]) if f.role == "written"]


SAVER = """
import json, os, struct, sys, time
header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
with open("ckpt_000007.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + b"\\0\\0\\0\\0")
print("step 7 saved ckpt_000007.safetensors", flush=True)
print("ready", file=sys.stderr, flush=True)
time.sleep(600)
"""


@needs_root_unshare
@pytest.mark.timeout(120)
def test_resume_reads_a_job_s_checkpoints_as_the_job_sees_them(tmp_path, session_job):
    """The job's folder is a tmpfs of its own mount namespace holding ckpt_000007; in ours the same
    folder holds another run's ckpt_000099. The resume plan is the job's, from its own folder."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "ckpt_000099.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    inner = f"mount -t tmpfs none {folder} && cd {folder} && exec {sys.executable} {script} > {folder}/out.log"
    unshare = ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner]
    proc = session_job(unshare, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "ready"
    result = run_subprocess("resume", "--pid", proc.pid, "--format", "json", timeout=90)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["checkpoint"] == str(folder / "ckpt_000007.safetensors"), plan
    assert "ckpt_000099" not in result.stdout


@pytest.mark.timeout(120)
def test_a_log_named_by_the_user_that_is_the_jobs_own_stdout_is_read_once(zoo):  # noqa: F811
    """`--log` given by another name (relative to the job's folder, or with `./`) for the file the job
    writes its stdout to: one log in the report, its evidence counted once."""
    job = zoo("producer_died")
    other_name = os.path.join(str(job.workdir), ".", "log.txt")
    result = run_subprocess(
        "diagnose", "--pid", job.proc.pid, "--log", other_name, "--window", "1", "--format", "json", timeout=120
    )
    assert result.returncode == 0, result.stderr
    logs = json.loads(result.stdout)["logs"]
    assert len(logs) == 1 and logs[0]["path"].endswith("log.txt"), logs


TWO_LOGS = """
import logging, sys, time
logging.basicConfig(filename=sys.argv[1], level=logging.INFO, format="%(asctime)s %(message)s")
for step in (100, 200):
    print(f"step {step} loss 0.5", flush=True)
    logging.info("step %d loss 0.5", step)
print("ready", file=sys.stderr, flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(120)
def test_the_stdout_and_the_log_file_of_one_run_are_not_two_runs_at_the_same_step(tmp_path, session_job):
    """A job prints its steps and logs them to a file too: both stop at step 200, but they are one
    run, not two that hung at the same step (no "same-step" answer, no deterministic pattern)."""
    script = tmp_path / "job.py"
    script.write_text(TWO_LOGS)
    with open(tmp_path / "stdout.txt", "w") as out:
        proc = session_job(
            [sys.executable, "-I", script, tmp_path / "train.log"], stdout=out, stderr=subprocess.PIPE, text=True
        )
    assert proc.stderr.readline().strip() == "ready"
    result = run_subprocess("diagnose", "--pid", proc.pid, "--format", "json", "--window", "0.5", timeout=90)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert sorted(entry["path"] for entry in report["logs"]) == [str(tmp_path / n) for n in ("stdout.txt", "train.log")]
    assert "step" not in report["answers"], report["answers"]
    assert report["pattern"] != "D", report["pattern"]
    # the log of an earlier run, given by the user, still counts as a run of its own
    earlier = tmp_path / "run1.log"
    earlier.write_text("step 100 loss 0.5\nstep 200 loss 0.5\n")
    os.utime(earlier, (1, 1))
    result = run_subprocess("diagnose", "--pid", proc.pid, "--log", earlier, "--format", "json", "--window", "0.5")
    step = json.loads(result.stdout)["answers"].get("step") or {}
    assert step.get("value") == "same-step", step


ARCHIVE = """
import subprocess, sys
print("step 60 loss 0.5", flush=True)
print("ready", file=sys.stderr, flush=True)
# a checkpoint archived through a child's stdout, as `tar ... | gzip > ckpt.tar.gz` does; it never ends
GZIP = ("import os, sys, time\\nwhile True:\\n"
        "    sys.stdout.buffer.write(os.urandom(65536)); sys.stdout.flush(); time.sleep(0.2)")
subprocess.run([sys.executable, "-I", "-c", GZIP], stdout=open(sys.argv[1], "wb"))
"""


@pytest.mark.timeout(120)
def test_a_binary_file_a_child_writes_through_its_stdout_is_progress_not_a_log(tmp_path, session_job):
    """A checkpoint archive written by a child's stdout (gzip > ckpt.tar.gz) is the job's output: it
    counts as written (progress), and is never reported as a log that "looks binary"."""
    script = tmp_path / "job.py"
    script.write_text(ARCHIVE)
    archive = tmp_path / "ckpt.tar.gz"
    with open(tmp_path / "stdout.txt", "w") as out:
        proc = session_job([sys.executable, "-I", script, archive], stdout=out, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "ready"
    result = run_subprocess("diagnose", "--pid", proc.pid, "--format", "json", "--window", "1.0", timeout=90)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert not [e for e in report["errors"] if "looks binary" in e], report["errors"]
    assert str(archive) not in [entry["path"] for entry in report["logs"]], report["logs"]
    assert report["verdict"]["hung"] is not True, report["verdict"]
