"""The hang zoo, diagnosed live: real processes that really hang, and the verdict on each."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import diagnosed as run_diagnosis
from conftest import run_subprocess
from debug_stuck.errors import NotInspectable
from debug_stuck.pipeline import DiagnoseRequest


def diagnose(knowledge, *pids, **options):
    request = DiagnoseRequest(pids=list(pids), window=options.pop("window", 1.0), **options)
    return run_diagnosis(request, knowledge)


def causes(report):
    procs = [(p["role"], p["state"], p["cpu_percent"], p["stack"], p["wchan"]) for p in report.processes]
    return [(d.cause, d.confidence) for d in report.diagnoses[:4]], procs, report.errors


def needs_torch():
    pytest.importorskip("torch")


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "program, cause",
    [
        ("future_result", "thread-deadlock"),
        ("lock_deadlock", "thread-deadlock"),
        ("native_spin", "cpu-spin"),
    ],
)
def test_pure_python_hangs(knowledge, zoo, program, cause):  # noqa: F811
    job = zoo(program)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, report.verdict.summary
    assert report.verdict.cause == cause, causes(report)
    assert report.processes and report.processes[0]["threads"]


@pytest.mark.timeout(180)
def test_gc_collect_on_the_jobs_own_line_is_read_without_a_native_unwind(knowledge, zoo):  # noqa: F811
    """py-spy shows no frame for the builtin gc.collect(), and a native unwind (gc_collect_main) fails
    now and then: the line of the job's own code that calls it says the collector runs. Without native
    frames at all, the cause is still gc-pause (it was cpu-spin 93% when an unwind failed)."""
    job = zoo("gc_heavy")
    report = diagnose(knowledge, job.proc.pid, native=False)
    assert report.diagnoses[0].cause == "gc-pause", causes(report)
    # any sample of the window at that line counts: the report's frames are the last sample only, and
    # about one in a hundred lands on the allocation loop (the CI run on 02cdb0a caught line 59)
    assert report.chain[-1]["waits_on"].get("gc") == "yes", report.chain[-1]


@pytest.mark.timeout(180)
def test_process_spending_its_time_in_gc(knowledge, zoo):  # noqa: F811
    # Between collections its loop allocates a little, so two samples may land on different
    # lines (slow progress, not a frozen stack): the cause must be named either way.
    job = zoo("gc_heavy")
    report = diagnose(knowledge, job.proc.pid)
    assert report.diagnoses[0].cause == "gc-pause", causes(report)
    if report.verdict.hung:
        assert report.verdict.cause == "gc-pause"


@pytest.mark.timeout(180)
def test_stdout_pipe_full(knowledge, zoo):  # noqa: F811
    job = zoo("stdout_pipe", stdout="pipe")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True
    assert report.verdict.cause == "output-blocked", causes(report)
    evidence = " ".join(e.detail for e in report.diagnoses[0].evidence)
    assert "pipe" in evidence


@pytest.mark.timeout(180)
@pytest.mark.parametrize("hang_index", [4, 5])
def test_dataloader_worker_blocked_in_getitem(knowledge, zoo, hang_index):  # noqa: F811
    """Sample 4 blocks the first worker; sample 5 the second, while the first sits idle in its index
    queue's get (under select, wait and poll frames): the idle one is not taken for the blocked one."""
    needs_torch()
    job = zoo("dataloader_io", args=[str(hang_index)])
    report = diagnose(knowledge, job.proc.pid)
    roles = sorted(p["role"] for p in report.processes)
    assert roles.count("dataloader-worker") == 2, roles
    assert report.verdict.hung is True
    assert_names_the_fifo_its_worker_waits_on(report, job.info)


@pytest.mark.timeout(180)
def test_every_dataloader_worker_computing_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """A trainer waiting for a batch while all its workers compute (20 s a sample) is how a job
    bound by its input pipeline looks: no false alarm; the report says what would tell."""
    needs_torch()
    job = zoo("dataloader_compute", args=["slow"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is None, report.verdict.summary
    reason = report.verdict.state_reasons[0]
    assert f"pid {job.proc.pid} (rank) waits for its DataLoader workers while all 2 of them compute" in reason
    assert f"py-spy dump --locals --pid {job.info['workers'][0]}" in reason, reason
    assert report.verdict.summary.startswith("Not judged hung from this window"), report.verdict.summary
    # not told apart from slow work: the cause it would be is kept, under a sure verdict's 50%, and the
    # summary does not lead with a guess
    assert report.verdict.cause == "dataloader" and report.verdict.confidence <= 0.45, report.verdict
    assert "If it is stuck, the likeliest cause" not in report.verdict.summary, report.verdict.summary
    assert report.culprit is None, report.culprit  # nothing is known to be stuck: nobody is blamed


@pytest.mark.timeout(180)
def test_one_worker_computing_while_its_sibling_idles_is_hung_on_that_worker(knowledge, zoo):  # noqa: F811
    needs_torch()
    job = zoo("dataloader_compute", args=["stuck"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, report.verdict.summary
    (worker,) = job.info["workers"]
    assert report.culprit["pid"] == worker, report.culprit
    assert report.verdict.cause == "dataloader", causes(report)


@pytest.mark.timeout(180)
def test_a_dataloader_workers_pid_diagnoses_its_whole_job(knowledge, zoo):  # noqa: F811
    # issue 17: --pid of a worker climbs to its trainer, as the session's attach does
    needs_torch()
    job = zoo("dataloader_io")
    report = diagnose(knowledge, job.info["worker_pid"])
    pids = {p["pid"]: p["role"] for p in report.processes}
    assert pids.get(job.info["pid"]) == "rank" and pids.get(job.info["worker_pid"]) == "dataloader-worker", pids
    assert f"pid {job.info['worker_pid']} is a worker process of pid {job.info['pid']}" in " ".join(report.notes)
    assert_names_the_fifo_its_worker_waits_on(report, job.info)


def assert_names_the_fifo_its_worker_waits_on(report, ready) -> None:
    """The chain goes from the trainer to the worker blocked in open() of a FIFO with no writer; the
    cause follows that terminal blocker (a stalled read), with the DataLoader next."""
    summary = report.verdict.summary
    assert f"DataLoader worker pid {ready['worker_pid']}" in summary, summary
    assert f"open() of the FIFO {ready['fifo']}, with no writer" in summary, summary
    assert f"pid {ready['pid']} waits for it in" in summary, summary
    assert [hop["pid"] for hop in report.chain] == [ready["pid"], ready["worker_pid"]]
    assert report.chain[0]["waits_on"]["kind"] == "worker"
    assert report.chain[-1]["waits_on"] == {
        "kind": "fifo",
        "object": ready["fifo"],
        "detail": f"is blocked in open() of the FIFO {ready['fifo']}, with no writer",
        "op": "open",
        "end": "no-writer",
        "via": "worker",
    }
    assert [d.cause for d in report.diagnoses[:2]] == ["io-stall", "dataloader"], causes(report)
    assert report.verdict.cause == "io-stall"


@pytest.mark.timeout(240)
def test_torchrun_gloo_straggler_names_the_culprit_rank(knowledge, zoo):  # noqa: F811
    needs_torch()
    job = zoo("gloo_straggler")
    rank0 = job.rank(0).pid
    report = diagnose(knowledge, rank0)  # one rank is enough: its launcher and siblings come along
    roles = [p["role"] for p in report.processes]
    assert roles.count("rank") == 2 and "launcher" in roles, roles
    assert report.culprit is not None, report.stack_groups
    assert report.culprit["rank"] == 1
    assert report.culprit["pid"] == job.rank(1).pid
    assert "all_reduce" in report.culprit["reason"]
    assert report.verdict.cause == "dataloader", causes(report)
    assert report.verdict.hung is True
    assert len(report.stack_groups) == 2


@pytest.mark.timeout(180)
def test_init_process_group_waits_for_a_missing_rank(knowledge, zoo):  # noqa: F811
    needs_torch()
    job = zoo("rendezvous_missing_rank")
    time.sleep(1.0)  # READY is written just before init_process_group blocks
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.cause == "rendezvous", causes(report)
    assert report.verdict.hung is True
    # no scheduler placed it (no SLURM_JOB_ID, no Ray variable): squeue and ray status are not for it
    # (the eighth hunt's rdzv_nnodes2 and spawn_worldsize led with them)
    from debug_stuck.advice import advise

    diagnosis = advise(report, knowledge).diagnoses[0]
    left = {f["title"]: f["why"] for f in diagnosis.fixes_left_out}
    assert "no scheduler in its environment" in left.get("See whether the scheduler started every rank", ""), left
    assert not any("squeue" in c for f in diagnosis.fixes for c in f.commands)


@pytest.mark.timeout(180)
def test_spawned_ranks_short_of_their_world_size_are_counted(knowledge, zoo):  # noqa: F811
    """The eighth hunt's spawn_worldsize: mp.spawn starts 2 ranks, init_process_group is told 3 (an
    argument, in no environment). The fix counts them: world_size 3, 2 ranks here, 1 more awaited."""
    needs_torch()
    from debug_stuck.advice import advise

    job = zoo("spawn_world_short")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "rendezvous", causes(report)
    ranks = {p["pid"]: p for p in report.processes if p["role"] == "rank"}
    assert sorted(ranks) == sorted([job.info["rank0_pid"], job.info["rank1_pid"]]), report.processes
    assert {p["world_size"] for p in ranks.values()} == {3}, report.processes
    fix = advise(report, knowledge).diagnoses[0].fixes[0]
    assert fix.title == "The process group waits for 3 ranks; this machine runs 2", fix.title
    assert "the group waits for 1 more" in fix.why and "(rank 0, 1)" in fix.why, fix.why


@pytest.mark.timeout(180)
def test_ranks_a_launcher_starts_one_after_another_are_told_to_start_together(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j23: a launcher runs subprocess.run() per rank in a loop, so rank 1 starts
    only after rank 0 exits, and rank 0 waits for it in init_process_group. The fix said only "this
    machine runs 1" of 2; it names the launcher's loop now."""
    needs_torch()
    from debug_stuck.advice import advise

    job = zoo("ranks_in_turn")
    report = diagnose(knowledge, job.proc.pid)  # the launcher, as the hunt gave it
    assert report.verdict.hung is True and report.verdict.cause == "rendezvous", causes(report)
    fix = advise(report, knowledge).diagnoses[0].fixes[0]
    assert fix.title.startswith(f"Start the ranks together: pid {job.proc.pid} starts them one after another ("), (
        fix.title
    )
    assert "ranks_in_turn.py:" in fix.title and "subprocess.Popen" in fix.commands[-1], fix


@pytest.mark.timeout(180)
def test_torchrun_waiting_for_a_node_that_never_joins(knowledge, zoo, tmp_path):  # noqa: F811
    """The eighth hunt's rdzv_nnodes2: `torchrun --nnodes=2` on one machine; its agent starts no worker
    and waits in the elastic rendezvous. It is the launcher (not a rank), the job is hung at the
    rendezvous, and the first fix counts the nodes and gives the one-node command."""
    needs_torch()
    from debug_stuck.advice import advise
    from debug_stuck.zoo import spawn

    script = tmp_path / "train.py"
    script.write_text("import torch.distributed as dist\ndist.init_process_group('gloo')\n")
    endpoint = f"127.0.0.1:{spawn.free_port()}"
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
            "--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}", "--rdzv_id=zoo42", str(script)]  # fmt: skip
    job = zoo("torchrun_nodes", argv=argv, wait_ready=False)
    py_spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")

    def in_the_rendezvous() -> bool:
        out = subprocess.run([py_spy, "dump", "--pid", str(job.proc.pid)], capture_output=True, text=True, timeout=20)
        return "next_rendezvous" in out.stdout and "_delay" in out.stdout

    deadline = time.monotonic() + 90
    while not in_the_rendezvous():
        assert job.proc.poll() is None and time.monotonic() < deadline, job.log_text()[-2000:]
        time.sleep(0.5)
    report = diagnose(knowledge, job.proc.pid)
    roles = {p["pid"]: p["role"] for p in report.processes}
    assert roles == {job.proc.pid: "launcher"}, roles
    assert report.verdict.hung is True and report.verdict.cause == "rendezvous", causes(report)
    fix = advise(report, knowledge).diagnoses[0].fixes[0]
    assert fix.title.startswith("This machine's torchrun waits for 2 nodes"), fix.title
    assert f"rendezvous zoo42 at {endpoint}" in fix.why, fix.why
    (one_node,) = fix.commands
    assert one_node.startswith(sys.executable) and " --nnodes=1 " in one_node and "--rdzv_id=zoo42" in one_node
    assert not any("SLURM_JOB_ID" in c for f in advise(report, knowledge).diagnoses[0].fixes for c in f.commands)


@pytest.mark.timeout(180)
def test_a_rank_that_died_before_the_rendezvous_is_a_dead_rank_not_a_worker(knowledge, zoo):  # noqa: F811
    """The launcher script's dead child (a zombie: no command line, no environment) is a rank, and the
    rendezvous that waits for it says a rank is gone."""
    needs_torch()
    job = zoo("launcher_dead_rank")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "rendezvous", causes(report)
    roles = {p["pid"]: (p["role"], p["state"]) for p in report.processes}
    assert roles[job.info["rank1_pid"]] == ("rank", "Z") and roles[job.proc.pid][0] == "launcher", roles
    said = [e.detail for e in report.diagnoses[0].evidence]
    assert any("a rank has exited (state Z)" in d for d in said), said


@pytest.mark.timeout(180)
def test_torch_save_blocked_on_its_destination(knowledge, zoo):  # noqa: F811
    needs_torch()
    job = zoo("torch_save_blocked")
    time.sleep(0.5)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.cause == "checkpoint-save", causes(report)
    assert report.verdict.hung is True


@pytest.mark.timeout(180)
def test_healthy_job_is_not_hung(knowledge, zoo):  # noqa: F811
    needs_torch()
    job = zoo("healthy")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False, report.verdict.summary
    assert report.verdict.cause is None
    assert "making progress" in report.verdict.summary


# Bad targets: a clear message and exit code, never a hang.


@pytest.mark.timeout(60)
def test_pid_that_does_not_exist():
    proc = run_subprocess("diagnose", "--pid", "4000000", timeout=30)
    assert proc.returncode == 3
    assert "4000000 does not exist" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.timeout(60)
def test_non_python_process(zoo):  # noqa: F811
    job = zoo("sleep")
    proc = run_subprocess("diagnose", "--pid", job.proc.pid, timeout=30)
    assert proc.returncode == 3
    assert "not a Python process" in proc.stderr and "Traceback" not in proc.stderr


def gone(pid: int, timeout: float) -> bool:
    """The process has ended and been reaped (no zombie left), within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.01)
    return False


def _when(step: str, action):
    """A progress callback that runs `action` once, the moment the diagnosis reaches `step`."""
    done = []

    def progress(message: str) -> None:
        if message.startswith(step) and not done:
            done.append(message)
            action()

    return progress, done


@pytest.mark.timeout(60)
def test_process_that_exits_mid_capture(knowledge, zoo):  # noqa: F811
    """The job was found, then exits before its stacks are sampled: nothing is left to read."""
    job = zoo("exits_soon")

    def exit_now():
        (job.workdir / "EXIT").touch()
        assert job.proc.wait(timeout=15) == 0

    progress, done = _when("sampling", exit_now)
    started = time.monotonic()
    with pytest.raises(NotInspectable, match="exited while being inspected"):
        diagnose(knowledge, job.proc.pid, progress=progress)
    assert done and time.monotonic() - started < 20


@pytest.mark.timeout(60)
def test_a_process_of_the_job_exits_mid_capture(knowledge, zoo):  # noqa: F811
    """One process of the job exits while it is sampled: the report of the rest says what went missing."""
    job = zoo("exits_soon", args=["--child"])
    child = job.info["child"]

    def child_exits():
        (job.workdir / "EXIT-CHILD").touch()
        assert gone(child, 15)

    progress, done = _when("sampling", child_exits)
    report = diagnose(knowledge, job.proc.pid, progress=progress)
    assert done
    assert [p["pid"] for p in report.processes] == [job.proc.pid, child]
    assert any(str(child) in e for e in report.errors), report.errors
    parent = next(p for p in report.processes if p["pid"] == job.proc.pid)
    assert any("wait_for" in f["function"] for t in parent["threads"] for f in t["frames"])


@pytest.mark.timeout(60)
def test_sigstopped_process(knowledge, zoo):  # noqa: F811
    job = zoo("future_result")
    os.kill(job.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    report = diagnose(knowledge, job.proc.pid)
    assert time.monotonic() - started < 15
    assert report.processes[0]["state"] == "T"
    assert any("stopped" in n for n in report.notes), report.notes


def _nobody_readable_install(root):
    """A copy of debug-stuck and its pure dependencies that an unprivileged user can read."""
    import importlib

    from conftest import REPO

    site = root / "site"
    site.mkdir()
    for name in ("assistant", "probes", "skills"):
        shutil.copytree(REPO / name, site / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "SKILL.md", site / "SKILL.md")
    for module in ("yaml", "markdown_it", "mdurl", "psutil", "pynvml"):
        path = importlib.import_module(module).__file__
        if path.endswith("__init__.py"):
            shutil.copytree(os.path.dirname(path), site / module, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, site / os.path.basename(path))
    bindir = root / "bin"
    bindir.mkdir()
    from debug_stuck.probes.collectors.stacks import _find_py_spy

    shutil.copy2(_find_py_spy(), bindir / "py-spy")
    for path in [root, *root.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return site, bindir


@pytest.mark.timeout(90)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a root process and drop to nobody")
def test_without_ptrace_permission(zoo):  # noqa: F811
    import tempfile
    from pathlib import Path

    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    job = zoo("future_result")
    root = Path(tempfile.mkdtemp(prefix="debug-stuck-nobody-", dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        site, bindir = _nobody_readable_install(root)
        env = dict(os.environ, PYTHONPATH=str(site), PATH=f"{bindir}:/usr/bin:/bin", HOME=str(root))
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
        argv += [sys.executable, "-m", "debug_stuck", "diagnose", "--pid", str(job.proc.pid)]
        started = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=str(root), env=env)
        elapsed = time.monotonic() - started
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if "No module named" in proc.stderr or proc.returncode == 126:
        pytest.skip(f"cannot run Python as nobody here: {proc.stderr.strip()[-200:]}")
    # issue 16: not exit 3 with one line, but the partial report, saying what is missing and how to get it
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f"Missing: Python stacks of process(es) {job.proc.pid}" in proc.stdout
    assert f"To get it: run it as root: sudo debug-stuck diagnose --pid {job.proc.pid}" in proc.stdout
    assert elapsed < 30


@pytest.mark.timeout(180)
def test_auto_finds_the_training_job(knowledge, zoo):  # noqa: F811
    needs_torch()
    from debug_stuck.probes.collectors.procs import find_training_processes

    job = zoo("dataloader_io")
    roots = find_training_processes()
    assert job.proc.pid in roots
    report = run_diagnosis(DiagnoseRequest(auto=True), knowledge)
    if roots != [job.proc.pid]:  # other torch jobs on this machine: --auto picks the oldest and says so
        assert any(str(job.proc.pid) in note and "--pid" in note for note in report.notes), report.notes
        return
    assert set(job.pids()) <= {p["pid"] for p in report.processes}
    assert_names_the_fifo_its_worker_waits_on(report, job.info)


@pytest.mark.timeout(240)
def test_two_ranks_with_four_workers_each(knowledge, zoo):  # noqa: F811
    needs_torch()
    job = zoo("ddp_workers", ready_timeout=120)
    report = diagnose(knowledge, job.proc.pid)
    roles = [p["role"] for p in report.processes]
    assert roles.count("rank") == 2 and roles.count("dataloader-worker") == 8, roles
    workers_of_rank1 = [p for p in report.processes if p["role"] == "dataloader-worker" and p["rank"] == 1]
    assert len(workers_of_rank1) == 4
    assert report.culprit["rank"] == 1
    assert report.verdict.cause == "dataloader", causes(report)


@pytest.mark.timeout(120)
def test_demo_runs_and_cleans_up(cli):
    import psutil

    before = {p.pid for p in psutil.process_iter()}
    code, out, err = cli("demo", "deadlock")
    assert code == 0, err
    assert "Cause: thread-deadlock" in out
    assert "stopped the demo job" in err
    time.sleep(0.5)
    # the demo's own job (lock_deadlock.py); other zoo jobs may run beside this test (the suite's own, in
    # another checkout): not the demo's to clean up
    leftover = [
        p
        for p in psutil.process_iter(["pid", "cmdline"])
        if p.pid not in before and "zoo/lock_deadlock.py" in " ".join(p.info["cmdline"] or [])
    ]
    assert leftover == []


def test_demo_list_and_bad_scenario(cli):
    code, out, _ = cli("demo", "--list")
    assert code == 0 and "straggler" in out and "deadlock" in out and "default:" in out
    code, _, err = cli("demo", "nope")
    assert code == 2 and "no demo scenario 'nope'" in err


@pytest.mark.timeout(240)
def test_a_launcher_scripts_ranks_are_found_from_their_stacks_and_the_absent_one_is_the_culprit(knowledge, zoo):  # noqa: F811
    # no torchrun and no RANK in any environment: the ranks are python children of a python script
    needs_torch()
    job = zoo("script_launcher")
    ready = job.info
    report = diagnose(knowledge, ready["launcher_pid"])
    roles = {p["pid"]: p["role"] for p in report.processes}
    assert roles == {ready["launcher_pid"]: "launcher", ready["rank0_pid"]: "rank", ready["rank1_pid"]: "rank"}
    assert report.culprit is not None and report.culprit["pid"] == ready["rank1_pid"], report.stack_groups
    assert (
        "is elsewhere: sleep_forever" in report.culprit["reason"]
        and "<- evaluate <- rank_main" in report.culprit["reason"]
    )
    assert report.verdict.cause == "collective", causes(report)
    assert report.verdict.hung is True
    # a rank's PID alone: its siblings could be a sweep's independent trials, so they are not taken
    # on a guess; the report says how to take them
    alone = diagnose(knowledge, ready["rank0_pid"])
    assert [p["pid"] for p in alone.processes] == [ready["rank0_pid"]]
    hint = f"diagnose it whole with --pid {ready['launcher_pid']}"
    assert any(note.startswith(f"pid {ready['rank0_pid']} is one of 2 copies") and hint in note for note in alone.notes)


@pytest.mark.timeout(240)
def test_a_first_step_still_compiling_is_progressing_in_a_compile_pass(knowledge, zoo):  # noqa: F811
    # the log stops at "compiling the first step" and the GPU would be idle: torch.compile at work
    needs_torch()
    job = zoo("compile_busy", ready_timeout=120)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False and report.verdict.state == "progressing", report.verdict.summary
    assert report.verdict.summary.endswith("in a compile pass."), report.verdict.summary
    assert report.diagnoses[0].cause == "compile", causes(report)


@pytest.mark.timeout(120)
def test_a_job_waiting_for_the_cpp_compiler_it_started_is_compiling_not_hung(knowledge, zoo):  # noqa: F811
    """Inductor's CPU kernels and cpp_extension builds run g++ as a child: the job waits in
    subprocess, g++ for cc1plus, and cc1plus computes. That is the compile at work: never hung, and the
    compiler is nobody's culprit."""
    if shutil.which("g++") is None:
        pytest.skip("no g++ on this machine")
    job = zoo("compile_cpp")
    compiler = job.info["compiler"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False and report.culprit is None, (report.verdict.summary, report.culprit)
    assert [hop["pid"] for hop in report.chain][-1] == compiler, report.chain
    assert f"process pid {compiler} (cc1plus) is a C/C++ compiler or linker that the job started" in (
        report.verdict.summary
    ), report.verdict.summary
    assert f"ps --ppid {job.proc.pid} -o pid,etime,args" in report.verdict.summary


def test_ranks_a_launch_script_gave_different_master_ports_are_one_job_told_to_use_one_port(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j20: a shell starts rank 0 with MASTER_PORT=P and rank 1 with Q. Given the
    shell, it is one job (not "2 unrelated jobs"); given rank 0, rank 1 comes along (not "never
    started"); the first fix names both addresses."""
    needs_torch()
    from debug_stuck.advice import advise
    from debug_stuck.zoo import spawn

    script = spawn.ZOO_DIR / "port_split.py"
    first, second = spawn.free_port(), spawn.free_port()
    line = "MASTER_ADDR=127.0.0.1 WORLD_SIZE=2 GLOO_SOCKET_IFNAME=lo"
    ranks = [f"{line} RANK={r} MASTER_PORT={port} {sys.executable} {script} &" for r, port in ((0, first), (1, second))]
    launcher = " ".join(ranks) + " wait"
    job = zoo("port_split", argv=["bash", "-c", launcher], wait_ready=True)
    rank0 = job.info["pid"]
    for pid in (job.proc.pid, rank0):
        report = diagnose(knowledge, pid)
        assert report.verdict.cause == "rendezvous", (pid, causes(report))
        ranks = sorted(p["rank"] for p in report.processes if p.get("role") == "rank")
        assert ranks == [0, 1], (pid, ranks)
        fix = advise(report, knowledge).diagnoses[0].fixes[0]
        assert fix.title.startswith("The ranks were given different rendezvous addresses"), fix.title
        assert f"MASTER_PORT={first}" in fix.title and f"MASTER_PORT={second}" in fix.title, fix.title
