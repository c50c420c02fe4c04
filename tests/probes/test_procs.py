"""Process discovery, roles and secrets redaction (real processes; no mocks)."""

from __future__ import annotations

import os
import sys
import time

import psutil
import pytest

from debug_stuck.probes.collectors.procs import (
    InspectError,
    ProcInfo,
    job_key,
    job_processes,
    read_process,
    read_states,
    sample_window,
)
from debug_stuck.redact import REDACTED, redact_env


def test_secrets_are_redacted():
    env = {
        "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz",
        "WANDB_API_KEY": "0123456789abcdef",
        "AWS_SECRET_ACCESS_KEY": "x",
        "DB_PASSWORD": "hunter2",
        "NCCL_DEBUG": "INFO",
        "SOME_URL_VALUE": "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "MASTER_PORT": "29500",
    }
    out = redact_env(env)
    assert out["NCCL_DEBUG"] == "INFO" and out["MASTER_PORT"] == "29500"
    for key in ("HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "SOME_URL_VALUE"):
        assert out[key] == REDACTED


@pytest.fixture
def child(session_job):
    def start(code, env=None, children=0):
        """The child running `code`, once exec'd (its own command line, environment and maps) and
        with `children` processes of its own."""
        proc = session_job([sys.executable, "-c", code], env=dict(os.environ, **(env or {})))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                process = psutil.Process(proc.pid)
                if process.cmdline()[-1:] == [code] and len(process.children()) >= children:
                    return proc
            except (psutil.Error, IndexError):
                pass
            time.sleep(0.02)
        raise AssertionError("the child did not start")

    return start


@pytest.mark.timeout(60)
def test_relevant_env_is_read_and_secrets_never_leave(child):
    proc = child(
        "import time; time.sleep(60)",
        env={
            "RANK": "3",
            "WORLD_SIZE": "8",
            "NCCL_SOCKET_IFNAME": "eth0",
            "TORCH_NCCL_AUTH_TOKEN": "s3cret",
            "HOME_X": "y",
        },
    )
    info = read_process(proc.pid)
    assert (info.rank, info.world_size) == (3, 8)
    assert info.env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert info.env["TORCH_NCCL_AUTH_TOKEN"] == REDACTED
    assert "HOME_X" not in info.env
    assert "'s3'" not in repr(info.to_dict())


@pytest.mark.timeout(60)
def test_forked_children_are_workers_and_cpu_is_measured(child):
    code = (
        "import os, time\n"
        "for _ in range(2):\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "t = time.time()\n"
        "while time.time() - t < 60: pass\n"
    )
    proc = child(code, children=2)
    deadline = time.monotonic() + 20
    while any(c.status() != psutil.STATUS_SLEEPING for c in psutil.Process(proc.pid).children()):
        assert time.monotonic() < deadline, "the workers did not reach their sleep"
        time.sleep(0.02)
    procs = job_processes([proc.pid])
    roles = {p.pid: p.role for p in procs}
    assert roles[proc.pid] == "rank"
    assert sorted(r for pid, r in roles.items() if pid != proc.pid) == ["dataloader-worker"] * 2
    read_states(procs)
    sample_window(procs, 1.0)
    main = next(p for p in procs if p.pid == proc.pid)
    assert main.cpu_percent > 50 and main.state == "R"
    worker = next(p for p in procs if p.pid != proc.pid)
    assert worker.cpu_percent < 20 and worker.state == "S"
    assert worker.wchan  # a sleeping task has a kernel wait channel


def test_gone_pid():
    with pytest.raises(InspectError) as err:
        job_processes([4_000_000])
    assert err.value.kind == "gone"


@pytest.mark.timeout(60)
def test_a_dead_forked_child_is_a_zombie_worker_and_no_dataloader_evidence_without_a_dataloader(child, knowledge):
    from conftest import diagnosed as run_diagnosis
    from debug_stuck.pipeline import DiagnoseRequest

    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os._exit(0)\n"  # the worker dies; the parent never reaps it
        "time.sleep(60)\n"
    )
    proc = child(code, children=1)
    deadline = time.monotonic() + 20
    while psutil.Process(proc.pid).children()[0].status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the worker did not exit"
        time.sleep(0.02)
    procs = job_processes([proc.pid])
    dead = [p for p in procs if p.pid != proc.pid]
    assert len(dead) == 1 and dead[0].state == "Z" and dead[0].role == "dataloader-worker"
    report = run_diagnosis(DiagnoseRequest(pids=[proc.pid]), knowledge)
    # the tree makes it a worker; no stack of the job runs a DataLoader, so the report and the
    # playbooks read it as a worker process, and a DataLoader's dead-worker line does not fire
    ranked = [d for d in report.diagnoses if d.cause == "dataloader"]
    assert not any("zombie" in e.detail for d in ranked for e in d.evidence), ranked
    assert next(p for p in report.processes if p["pid"] == dead[0].pid)["role"] == "worker-process"


def test_a_trainers_child_is_a_dataloader_worker_to_the_playbooks_only_in_a_job_that_runs_a_dataloader():
    from debug_stuck.live.observe import fact_role

    worker = ProcInfo(pid=2, ppid=1, name="python", cmdline=["python", "train.py"], role="dataloader-worker")
    assert fact_role(worker, True) == "dataloader-worker"
    assert fact_role(worker, None) == "dataloader-worker"  # no stack read: the tree's role stands
    assert fact_role(worker, False) == "worker-process"
    rank = ProcInfo(pid=1, ppid=0, name="python", cmdline=["python", "train.py"], role="rank")
    assert fact_role(rank, False) == "rank"


def test_a_program_is_what_the_interpreter_runs_not_its_options():
    from debug_stuck.probes.collectors.procs import program_of

    code = "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=4, pipe_handle={})"
    spawned = ["python", "-B", "-c", code]
    assert program_of([*spawned[:3], spawned[3].format(6)]) == program_of([*spawned[:3], spawned[3].format(8)])
    tracker = ["python", "-B", "-c", "from multiprocessing.resource_tracker import main;main(3)"]
    assert program_of(tracker) != program_of([*spawned[:3], spawned[3].format(6)])
    assert program_of(["python", "-u", "-W", "ignore", "train.py", "--lr", "1"]) == ("python", "train.py")
    assert program_of(["python", "-m", "torch.distributed.run", "x.py"]) == ("python", "-m", "torch.distributed.run")
    assert program_of(["python"]) == ("python",) and program_of([]) == ()


@pytest.mark.timeout(60)
def test_two_torchrun_jobs_with_the_default_run_id_are_two_jobs(child):
    """torchrun's default --rdzv-id is "none": every job started without one has TORCHELASTIC_RUN_ID=none.
    A leftover job's ranks were taken as ranks of the job diagnosed (an extra side in its mismatch)."""
    ranks = [
        child(
            "import time; time.sleep(60)", env={"TORCHELASTIC_RUN_ID": "none", "MASTER_PORT": port, "WORLD_SIZE": "2"}
        )
        for port in ("29614", "55293")
    ]
    keys = [job_key(rank.pid) for rank in ranks]
    assert keys[0] != keys[1] and keys[0][0] == "rendezvous", keys
    named = child("import time; time.sleep(60)", env={"TORCHELASTIC_RUN_ID": "run-7", "WORLD_SIZE": "2"})
    assert job_key(named.pid) == ("torchelastic", "run-7")
