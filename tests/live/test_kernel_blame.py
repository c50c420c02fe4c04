"""Kernel lines count against a job only when they are the job's.

Training nodes are shared: an OOM kill of another process (debug-stuck itself, before the job
started, in the report that found this), an Xid on a GPU the job does not use, an NFS server it does
not mount, are context, never a cause. The lines are real ones (tests/fixtures/kernel/), judged
against a job's marks; and, as root, real lines written to the kernel log while real jobs run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import run_subprocess
from debug_stuck.live.kernel_scope import JobScope, judge_lines, line_time, normalize_busid
from debug_stuck.probes.collectors.kernel import interesting_tagged

FIXTURE = Path(__file__).parents[1] / "fixtures" / "kernel" / "dmesg-T-hangs.txt"
LINES = FIXTURE.read_text(encoding="utf-8").splitlines()
OOM_VICTIM = 698405  # the process the fixture's OOM killer killed


def epoch(text: str) -> float:
    return time.mktime(time.strptime(text, "%a %b %d %H:%M:%S %Y"))


def verdicts(scope: JobScope):
    return {
        v.line: v
        for v in judge_lines(interesting_tagged(LINES), scope, boot_time=None, now=epoch("Wed Feb 11 00:00:00 2026"))
    }


def find(found, needle: str):
    return next(v for line, v in found.items() if needle in line)


def test_an_oom_kill_of_another_process_is_context_not_evidence():
    found = verdicts(JobScope(pids={4242}, started_at=epoch("Tue Feb 10 19:00:00 2026")))
    killed = find(found, "Out of memory: Killed process 698405")
    assert not killed.belongs and "698405" in killed.why and "not a process of the job" in killed.why
    assert not find(found, "oom-kill:constraint").belongs


def test_an_oom_kill_of_the_job_s_process_is_evidence():
    found = verdicts(JobScope(pids={OOM_VICTIM}, started_at=epoch("Tue Feb 10 19:00:00 2026")))
    assert find(found, "Out of memory: Killed process 698405").belongs
    assert find(found, "oom-kill:constraint").belongs


def test_lines_from_before_the_job_started_never_count():
    found = verdicts(JobScope(pids={OOM_VICTIM}, started_at=epoch("Tue Feb 10 21:00:00 2026")))
    killed = find(found, "Out of memory: Killed process 698405")
    assert not killed.belongs and "before the job started" in killed.why


def test_a_kill_in_the_job_s_own_cgroup_counts_but_a_whole_user_slice_does_not():
    line = (
        "[Tue Feb 10 20:30:11 2026] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
        "oom_memcg=/slurm/uid_1000/job_77,task_memcg=/slurm/uid_1000/job_77/step_0/task_0,task=python,pid=5151,uid=1000"
    )
    started = epoch("Tue Feb 10 19:00:00 2026")
    now = epoch("Wed Feb 11 00:00:00 2026")
    [mine] = judge_lines(
        [("oom", line)], JobScope(pids={1}, started_at=started, cgroups={"/slurm/uid_1000/job_77"}), None, now
    )
    assert mine.belongs and "cgroup" in mine.why
    slice_line = find(
        verdicts(JobScope(pids={1}, started_at=started, cgroups={"/user.slice/user-1000.slice"})), "oom-kill:"
    )
    assert not slice_line.belongs


def test_an_xid_counts_only_on_a_gpu_the_job_uses():
    started = epoch("Tue Feb 10 19:00:00 2026")
    xid = "NVRM: Xid (PCI:0000:3b:00)"
    assert find(verdicts(JobScope(pids={1}, started_at=started, gpu_busids={"0000:3b:00"})), xid).belongs
    other = find(verdicts(JobScope(pids={1}, started_at=started, gpu_busids={"0000:5e:00"})), xid)
    assert not other.belongs and "does not use" in other.why
    assert normalize_busid("00000000:3B:00.0") == "0000:3b:00"


def test_an_nfs_server_counts_only_when_the_job_mounts_it():
    started = epoch("Tue Feb 10 19:00:00 2026")
    assert find(verdicts(JobScope(pids={1}, started_at=started, nfs_servers={"ease"})), "nfs: server ease not").belongs
    assert not find(
        verdicts(JobScope(pids={1}, started_at=started, nfs_servers={"other"})), "nfs: server ease not"
    ).belongs


def test_times_of_every_kernel_log_format():
    boot = 1_000_000.0
    assert line_time("[  532.112096] hello", boot) == pytest.approx(boot + 532.112096)
    assert line_time("[Tue Feb 10 20:30:11 2026] x", None) == epoch("Tue Feb 10 20:30:11 2026")
    now = epoch("Wed Feb 11 00:00:00 2026")
    assert line_time("Feb 10 20:30:11.123456 host kernel: x", None, now) == epoch("Tue Feb 10 20:30:11 2026")
    assert line_time("2026-02-10T20:30:11.5+00:00 host kernel: x", None) == pytest.approx(1770755411.0)


# -- real lines in the real kernel log, real jobs --------------------------------------------------------

needs_kmsg = pytest.mark.skipif(
    os.geteuid() != 0 or not os.access("/dev/kmsg", os.W_OK), reason="needs root to write to /dev/kmsg"
)


def kernel_line(text: str) -> None:
    """Writes to the machine's real kernel log: the line says it is a test's, for whoever reads dmesg
    there later (the kernel's own text follows, as the playbooks' patterns search a line for it)."""
    with open("/dev/kmsg", "w") as kmsg:
        kmsg.write(f"<3>debug-stuck test suite, not a real event: {text}\n")


def dmesg_readable() -> bool:
    return subprocess.run(["dmesg"], capture_output=True).returncode == 0


@needs_kmsg
@pytest.mark.timeout(240)
def test_an_earlier_oom_kill_on_the_machine_is_not_blamed_on_jobs_that_start_later(zoo):  # noqa: F811
    if not dmesg_readable():
        pytest.skip("dmesg cannot be read here")
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    victim.kill()
    victim.wait(timeout=10)
    kernel_line(
        f"Out of memory: Killed process {victim.pid} (python3) total-vm:24000000kB, anon-rss:23000000kB, "
        "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:47000kB oom_score_adj:0"
    )
    written = time.time()
    while time.time() < written + 3.5:  # the jobs must start after the line, past dmesg's 1 s stamps
        time.sleep(0.2)
    for program in ("lock_deadlock", "file_logger"):
        job = zoo(program, stdout="pipe")
        result = run_subprocess("diagnose", "--pid", job.proc.pid, "--format", "json", timeout=120)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        top = report["diagnoses"][0]["cause"]
        assert top != "memory-pressure", (program, [(d["cause"], d["confidence"]) for d in report["diagnoses"][:3]])
        kernel_evidence = [e for d in report["diagnoses"] for e in d["evidence"] if e["source"] == "kernel"]
        assert not kernel_evidence, kernel_evidence
        assert any(f"Killed process {victim.pid}" in n and "not counted" in n for n in report["notes"]), report["notes"]
        job.stop()


@needs_kmsg
@pytest.mark.timeout(180)
def test_an_oom_kill_naming_the_job_s_process_is_evidence(zoo):  # noqa: F811
    if not dmesg_readable():
        pytest.skip("dmesg cannot be read here")
    job = zoo("lock_deadlock", stdout="pipe")
    kernel_line(
        f"Out of memory: Killed process {job.proc.pid} (python3) total-vm:24000000kB, anon-rss:23000000kB, "
        "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:47000kB oom_score_adj:0"
    )
    result = run_subprocess("diagnose", "--pid", job.proc.pid, "--format", "json", timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    memory = next(d for d in report["diagnoses"] if d["cause"] == "memory-pressure")
    assert any(e["source"] == "kernel" and str(job.proc.pid) in e["text"] for e in memory["evidence"]), memory


def test_kernel_lines_of_other_jobs_are_two_notes_and_a_count():
    # six OOM kills of processes that ran before the job: context, not cause; they do not fill the notes
    from debug_stuck.live.kernel_scope import KernelVerdict, context_notes

    lines = [f"Out of memory: Killed process {1000 + i} (python3) total-vm:24000000kB" for i in range(6)]
    verdicts = [
        KernelVerdict(line, "oom", False, f"logged {6 - i} min before the job started") for i, line in enumerate(lines)
    ]
    ours = KernelVerdict("Out of memory: Killed process 4242 (python3)", "oom", True, "")
    notes = context_notes(verdicts + [ours])
    assert notes == [
        f"kernel log, not counted against this job (logged 2 min before the job started): {lines[4]}",
        f"kernel log, not counted against this job (logged 1 min before the job started): {lines[5]}",
        "kernel log: 4 earlier line(s) not counted against this job left out",
    ], notes
