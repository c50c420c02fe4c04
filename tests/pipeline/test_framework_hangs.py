"""Hangs in real frameworks, diagnosed live: the culprit is whoever the others wait for, whatever the
framework (a rank in an extra collective, a stopped or spinning rank, a child process at the end of
the chain); a rank that computes while the others wait is not hung; a lost pool task and a queue
whose producer thread died are named for what they are; candidates the job's facts rule out are
not ranked."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import diagnosed as run_diagnosis
from debug_stuck.kb import load_knowledge
from debug_stuck.pipeline import DiagnoseRequest
from debug_stuck.zoo import spawn

pytestmark = pytest.mark.timeout(180)

FIXTURES = Path(__file__).parents[1] / "fixtures"
NEEDS_A_RANK = {"collective", "rendezvous", "nccl-init", "network"}


def diagnose(knowledge, pid):
    return run_diagnosis(DiagnoseRequest(pids=[pid], window=1.0), knowledge)


def first_fix(report):
    """The first fix, with the advice stage run on the report as the CLI runs it."""
    from debug_stuck.advice import advise

    return advise(report, load_knowledge()).diagnoses[0].fixes[0]


def advise_all(report):
    """Every fix of every diagnosis, with the advice stage run on the report as the CLI runs it."""
    from debug_stuck.advice import advise

    return [fix for diagnosis in advise(report, load_knowledge()).diagnoses for fix in diagnosis.fixes]


def top(report):
    return [(d.cause, d.confidence) for d in report.diagnoses[:4]], report.culprit, report.verdict.summary


def undecided_summary(report) -> str:
    """The summary of a job watched and not told apart from a slow one, which blames nobody."""
    assert report.verdict.hung is None and report.culprit is None, top(report)
    return report.verdict.summary


def wait_for(condition, what: str, job, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline or job.proc.poll() is not None:
            raise AssertionError(f"{what} did not happen; log tail:\n{job.log_text()[-2000:]}")
        time.sleep(0.05)


# -- a rank in an extra collective --------------------------------------------------------------------


def test_lightning_save_checkpoint_on_rank_0_alone_names_rank_0(knowledge, zoo):  # noqa: F811
    pytest.importorskip("lightning")
    job = zoo("lightning_rank0_save", ready_timeout=120)
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, rank0)
    # Lightning's launcher re-runs the script for rank 1 (LOCAL_RANK=1, NODE_RANK=0 in its environment);
    # the script's own process is local rank 0, with nothing in its /proc environment to say so
    roles = {p["pid"]: (p["role"], p["rank"], p["local_rank"]) for p in report.processes}
    assert roles[rank0] == ("rank", 0, 0) and roles[rank1] == ("rank", 1, 1), roles
    summary = report.verdict.summary
    assert summary.startswith("Collective mismatch: rank 0 in barrier; rank 1 in broadcast"), summary
    assert report.culprit is not None and (report.culprit["pid"], report.culprit["rank"]) == (rank0, 0), top(report)
    assert "checkpoint save" in report.culprit["reason"] and "save_checkpoint" in report.culprit["reason"]
    assert report.verdict.hung is True and report.verdict.cause in ("collective", "checkpoint-save"), top(report)


def test_hf_trainer_callback_collective_on_rank_0_alone_names_rank_0(knowledge, zoo):  # noqa: F811
    pytest.importorskip("transformers")
    job = zoo("hf_trainer_callback", ready_timeout=120)
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, rank0)
    summary = report.verdict.summary
    assert summary.startswith("Collective mismatch: rank 0 in all_reduce; rank 1 in all_gather"), summary
    assert report.culprit is not None and (report.culprit["pid"], report.culprit["rank"]) == (rank0, 0), top(report)
    assert "the job's own code at on_step_end (" in report.culprit["reason"]
    assert str(rank0) in summary and rank1 in {p["pid"] for p in report.processes}
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)


def test_ddp_with_uneven_inputs_names_both_sides_and_the_unequal_loops(knowledge, zoo):  # noqa: F811
    """Rank 1 ran out of batches and waits in a barrier; rank 0 waits in DDP's all-reduce in backward
    (a native wait, no torch.distributed frame): both call sites are the job's own lines, and the
    ranks' own progress lines ("step i/N", N unequal) name uneven inputs and DDP's join()."""
    job = zoo("ddp_uneven", ready_timeout=120)
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, rank0)
    summary = report.verdict.summary
    expected = "Collective mismatch: rank 0 in DDP's gradient all-reduce (in backward); rank 1 in barrier"
    assert summary.startswith(expected), summary
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    assert report.culprit is None or report.culprit["pid"] in (rank0, rank1)
    why = first_fix(report).why
    site = r"rank 0 in DDP's gradient all-reduce \(in backward\),\s+called at main \([\w/]*ddp_uneven\.py:\d+\)"
    assert re.search(site + r" via backward", why), why
    assert "rank 0 counts to 5, rank 1 counts to 3" in why and "model.join()" in why, why


def test_accelerate_gather_on_the_main_process_alone_names_both_sides_and_the_jobs_own_line(knowledge, zoo):  # noqa: F811
    """The wrapper (accelerate's gather) is not the line to change: the fix names the job's own call;
    rank 1's wait has no torch.distributed frame (DDP's reducer waits natively) and is still named;
    the job uses accelerate (its imports, its frames), so accelerate's fix is for it."""
    pytest.importorskip("accelerate")
    from debug_stuck.advice import advise

    job = zoo("accelerate_gather", ready_timeout=120)
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, rank0)
    summary = report.verdict.summary
    expected = "Collective mismatch: rank 0 in all_gather; rank 1 in DDP's gradient all-reduce (in backward)"
    assert summary.startswith(expected), summary
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    advised = advise(report, load_knowledge()).diagnoses[0]
    assert "called at <module> (" not in advised.fixes[0].why  # the script's loop is in main()
    assert re.search(r"called at main \([\w/]*accelerate_gather\.py:\d+\)", advised.fixes[0].why), advised.fixes[0].why
    titles = [fix.title for fix in advised.fixes]
    assert "Set the process-group timeout through accelerate" in titles, titles
    left_out = " ".join(item["title"] for item in advised.fixes_left_out)
    assert "accelerate" not in left_out and "with --ddp_timeout" in left_out, left_out
    assert rank1 in {p["pid"] for p in report.processes}


def test_an_rpc_caller_waits_for_the_callee_thread_that_runs_its_function(knowledge, zoo):  # noqa: F811
    """The seventh hunt's rpc_ps: worker 0 waits in rpc_sync; the function runs in an RPC thread of
    worker 1 (torch's _run_function) and waits on a Condition for a second trainer. The chain goes
    from the caller to that thread, and the culprit is worker 1 at the job's own line; not a lock order."""
    pytest.importorskip("torch")
    job = zoo("rpc_param_server", ready_timeout=150)
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    pids = [hop["pid"] for hop in report.chain]
    assert pids[-2:] == [rank0, rank1], report.chain
    assert report.chain[-2]["waits_on"]["detail"] == f"waits in rpc_sync for pid {rank1} to reply", report.chain
    end = report.chain[-1]
    assert re.search(r"push_and_pull \(\S*rpc_param_server\.py:\d+\)", end["waits_on"]["detail"]), end
    assert report.culprit is not None and report.culprit["pid"] == rank1, report.culprit
    from debug_stuck.advice import advise

    first = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    assert "one fixed order" not in first.title, first.title


def test_mp_spawn_ranks_are_ranks_and_the_one_blocked_on_its_shard_is_the_culprit(knowledge, zoo):  # noqa: F811
    """torch.multiprocessing.spawn's children look like multiprocessing workers by their command
    line; under torch's _wrap they are the job's ranks, their parent the launcher. The rank waiting
    in DDP's all-reduce is not to blame: the one blocked in open() of a FIFO is."""
    pytest.importorskip("torch")
    from debug_stuck.advice import advise

    job = zoo("mp_spawn_ranks", ready_timeout=120)
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, job.proc.pid)
    roles = {p["pid"]: p["role"] for p in report.processes}
    assert roles[job.proc.pid] == "launcher" and roles[rank0] == roles[rank1] == "rank", roles
    assert sorted(pid for pid, role in roles.items() if role == "rank") == sorted([rank0, rank1]), roles
    # no RANK in their environment: each one's index, as torch's _wrap was given it
    ranks = {p["pid"]: (p["rank"], p["local_rank"]) for p in report.processes}
    assert ranks[rank0] == (0, 0) and ranks[rank1] == (1, 1), ranks
    assert any("_wrap's argument i" in note for note in report.notes), report.notes
    assert report.culprit is not None and report.culprit["pid"] == rank1, top(report)
    assert report.culprit["rank"] == 1, report.culprit
    end = report.chain[-1]
    assert end["pid"] == rank1 and end["waits_on"]["kind"] == "fifo", report.chain
    assert report.verdict.cause == "io-stall" and report.verdict.hung is True, top(report)
    first = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    assert first.basis.startswith("fifo-no-writer") and job.info["path"] in first.title, (first.title, first.basis)


def launched_ranks_blame_rank1(report, launcher: int, rank0: int, rank1: int) -> dict:
    """The launcher is no rank, the ranks are numbered, rank 1 is the culprit: the chain's end."""
    roles = {p["pid"]: (p["role"], p["rank"]) for p in report.processes}
    assert roles[launcher] == ("launcher", None), roles
    assert roles[rank0] == ("rank", 0) and roles[rank1] == ("rank", 1), roles
    assert report.culprit is not None and report.culprit["pid"] == rank1, top(report)
    return report.chain[-1]


def test_accelerate_notebook_launcher_is_the_launcher_and_the_rank_blocked_on_its_shard_the_culprit(knowledge, zoo):  # noqa: F811
    """notebook_launcher runs torch elastic's agent in the notebook's own process: its frames are
    torch.distributed's, yet it is the ranks' launcher (before: a rank, and the culprit). The ranks,
    forked with no RANK in their /proc environment, are numbered from torch's _wrap."""
    pytest.importorskip("accelerate")
    job = zoo("accelerate_notebook", ready_timeout=120)
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, job.proc.pid)
    end = launched_ranks_blame_rank1(report, job.proc.pid, rank0, rank1)
    assert end["pid"] == rank1 and end["waits_on"]["kind"] == "fifo" and end["waits_on"]["object"] == job.info["path"]
    assert report.verdict.summary.startswith(f"Rank 1 (pid {rank1}) is blocked in open() of the FIFO"), top(report)


# -- one rank computes, spins or is stopped while the other waits (one job, three stages) -----------


class Stages:
    """rank_waits.py walked forward: eval (rank 0 evaluates) -> spin (rank 1 polls a flag file) ->
    stopped (rank 1 SIGSTOPped). Each test asks for its stage; earlier ones are passed on the way."""

    ORDER = ("eval", "spin", "stopped")

    def __init__(self, job):
        self.job = job
        self.rank0, self.rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
        self.stage = "eval"

    def marker(self, name: str):
        return lambda: (self.job.workdir / name).exists()

    def reach(self, stage: str) -> None:
        while self.ORDER.index(self.stage) < self.ORDER.index(stage):
            if self.stage == "eval":
                os.kill(self.rank0, signal.SIGUSR1)  # the evaluation ends
                wait_for(self.marker("SPINNING"), "rank 1 spinning while rank 0 waits", self.job)
                self.stage = "spin"
            else:
                (self.job.workdir / "resume.flag").touch()
                wait_for(self.marker("training-1"), "rank 1 back in training", self.job)
                spawn.stop_signal(self.job, self.rank1)
                wait_for(self.marker("STOPPED"), "rank 0 waiting for the stopped rank 1", self.job)
                self.stage = "stopped"


@pytest.fixture(scope="module")
def parted_ranks(request, tmp_path_factory):
    pytest.importorskip("torch")
    job = spawn.start(
        "rank_waits",
        tmp_path_factory.mktemp("rank_waits"),
        ready_timeout=120,
        on_spawn=lambda started: request.addfinalizer(started.stop),
    )
    return Stages(job)


def test_a_rank_evaluating_while_the_other_waits_is_not_hung(knowledge, parted_ranks):
    parted_ranks.reach("eval")
    for _ in range(2):
        report = diagnose(knowledge, parted_ranks.rank0)
        assert report.verdict.hung is False and report.verdict.state in ("progressing", "slow"), top(report)
        assert report.culprit is None and report.verdict.cause != "cpu-spin", top(report)
        assert f"pid {parted_ranks.rank0} (rank 0) computes" in report.verdict.summary, top(report)


def test_a_rank_spinning_on_a_flag_file_is_the_culprit_at_its_loop(knowledge, parted_ranks):
    parted_ranks.reach("spin")
    report = diagnose(knowledge, parted_ranks.rank0)
    assert report.verdict.hung is True and report.verdict.cause == "cpu-spin", top(report)
    assert report.culprit["pid"] == parted_ranks.rank1, top(report)
    summary = report.verdict.summary
    assert summary.startswith(f"Rank 1 (pid {parted_ranks.rank1}) keeps running, never waiting, at wait_for_flag ("), (
        summary
    )
    assert "rank_waits.py:" in summary.split(";")[0] and "genericpath" not in summary.split(";")[0]
    assert f"rank 0 (pid {parted_ranks.rank0}) waits for it in all_reduce" in summary
    fix = first_fix(report)
    assert fix.origin == "finding" and fix.title.startswith(f"Rank 1 (pid {parted_ranks.rank1}) never joins"), fix
    assert fix.commands == [f"py-spy dump --locals --pid {parted_ranks.rank1}"]


def recorded_gpu(fixture: str, pids: dict):
    """An H100's NVML as bench/gpu_check.py recorded it (tests/fixtures/gpu/README.md), replayed at the
    hardware seam, with the recorded PIDs in the driver's process table swapped for live ones."""
    import json

    from debug_stuck.probes.collectors.gpu.backends import RecordedBackend
    from debug_stuck.probes.collectors.gpu.collect import collect_gpus

    data = json.loads((FIXTURES / "gpu" / fixture).read_text())
    for device in data["devices"]:
        for proc in device.get("compute_processes") or []:
            proc["pid"] = pids[proc["pid"]]
    return collect_gpus(backend=RecordedBackend(data), samples=3, interval=0.0)


@pytest.mark.parametrize(
    "fixture, recorded, progressing",
    [
        # rank 0 of a gloo job evaluated on this GPU (99% busy at 696 W of 700 W) while rank 1 waited
        ("nvml-h100-eval-while-waiting.json", {775: "spinner", 776: "waiter"}, True),
        # 100% busy at 126 W of 700 W: a kernel that sleeps or spins, not the rank's work
        ("nvml-h100-cuda-sync.json", {1021: "spinner"}, False),
    ],
    ids=["gpu-computes", "gpu-low-draw"],
)
def test_a_rank_looping_beside_its_gpu_computing_is_a_long_pass_not_the_culprit(
    knowledge, parted_ranks, monkeypatch, fixture, recorded, progressing
):
    # On a GPU, a rank that evaluates waits in .item() on one line of its own code: its stack loops in
    # place like a spin. Its GPU, computing for it through the window, tells the two apart.
    parted_ranks.reach("spin")
    live = {"spinner": parted_ranks.rank1, "waiter": parted_ranks.rank0}
    gpus = recorded_gpu(fixture, {pid: live[who] for pid, who in recorded.items()})
    monkeypatch.setattr("debug_stuck.probes.collectors.gpu.collect.collect_gpus", lambda *a, **k: gpus)
    report = diagnose(knowledge, parted_ranks.rank0)
    if progressing:
        assert report.verdict.hung is False and report.verdict.state == "progressing", top(report)
        assert report.culprit is None, top(report)
        assert (
            f"pid {parted_ranks.rank1} (rank 1) computes on GPU 0 (99% busy at 696 W of 700 W) while "
            f"pid {parted_ranks.rank0} (rank 0) waits for it in a collective"
        ) in report.verdict.summary, top(report)
    else:
        assert report.verdict.hung is True and report.culprit["pid"] == parted_ranks.rank1, top(report)


def test_a_sigstopped_rank_is_the_culprit_named_as_stopped(knowledge, parted_ranks):
    parted_ranks.reach("stopped")
    report = diagnose(knowledge, parted_ranks.rank0)
    assert report.verdict.hung is True, top(report)
    assert report.culprit["pid"] == parted_ranks.rank1 and report.culprit["state"] == "T", top(report)
    assert "stopped (state T)" in report.culprit["reason"]
    assert report.verdict.summary.startswith(f"Rank 1 (pid {parted_ranks.rank1}) is stopped (SIGSTOP)"), top(report)
    assert report.verdict.cause != "output-blocked" and report.diagnoses[0].cause != "output-blocked", top(report)
    assert not any("computing" in reason for reason in report.verdict.state_reasons), report.verdict.state_reasons
    fix = first_fix(report)
    assert fix.origin == "finding" and f"kill -CONT {parted_ranks.rank1}" in fix.commands, fix


# -- processes and threads without ranks ------------------------------------------------------------


def test_a_trainer_waiting_on_its_uploader_child_names_the_child(knowledge, zoo):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("uploader_child")
    uploader = job.info["uploader_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.culprit is not None and report.culprit["pid"] == uploader and report.culprit["rank"] is None
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, uploader]
    summary = report.verdict.summary
    assert f"pid {uploader}" in summary and f"127.0.0.1:{job.info['port']}" in summary and "never answers" in summary
    assert "DataLoader" not in summary, summary  # a forked uploader is no DataLoader worker
    assert report.verdict.cause == "external-service", top(report)
    fix = first_fix(report)
    assert fix.origin == "finding" and f"127.0.0.1:{job.info['port']} never answers" in fix.title, fix
    assert "urlopen" in fix.why and f"Worker process pid {uploader}" in fix.why, fix.why
    assert all(str(job.proc.pid) not in c.command for c in report.diagnoses[0].check_items)


def test_pool_map_whose_result_handler_died_on_an_unpicklable_exception_says_so(knowledge, zoo):  # noqa: F811
    """The eighteenth hunt's j01: a worker's exception whose __init__ takes two arguments, one passed on;
    the parent's _handle_results thread dies unpickling it. It was "a worker died mid-task"."""
    job = zoo("pool_result_handler_died")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", report.verdict.summary
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "result-handler-died" and "Pool._handle_results" in end["detail"], end
    fix = first_fix(report)
    assert fix.basis.startswith("pool-result-handler-died"), fix.basis
    assert not any("dmesg" in c for c in fix.commands), fix.commands


def test_pool_map_after_a_worker_was_killed_is_a_lost_task_not_io(knowledge, zoo):  # noqa: F811
    job = zoo("pool_lost_task")
    victim = job.info["busy_worker"]
    os.kill(victim, signal.SIGKILL)

    def replaced_and_idle() -> bool:
        workers = [p.pid for p in job.processes() if p.pid != job.proc.pid]
        settled = all(spawn.proc_state(pid) == "S" for pid in workers)
        return (job.workdir / "done-1").exists() and len(workers) == 2 and victim not in workers and settled

    wait_for(replaced_and_idle, "the pool replaced its killed worker", job)
    report = diagnose(knowledge, job.proc.pid)
    # a process of the job gone, its parent waiting for ever: not a DataLoader (the job runs none; the
    # sixth hunt's pool_worker_oomkilled was labelled one, with DataLoader fixes), not I/O
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert "dataloader" not in [d.cause for d in report.diagnoses], top(report)
    assert report.chain[-1]["waits_on"]["kind"] == "pool", report.chain
    assert "the task in flight was lost" in report.verdict.summary, report.verdict.summary
    fix = first_fix(report)
    assert fix.origin == "finding" and "ProcessPoolExecutor" in fix.commands[-1], fix


@pytest.mark.parametrize("variant", [[], ["tqdm"]], ids=["plain", "tqdm"])
def test_a_queue_whose_producer_thread_died_is_a_wait_on_a_thread_that_is_gone(knowledge, zoo, variant):  # noqa: F811
    """With a tqdm bar (the seventh hunt's hf_collator: HF Trainer's), tqdm's monitor thread sleeps
    beside the main thread; it puts nothing in the job's queue, so no thread is left to."""
    if variant:
        pytest.importorskip("tqdm")
    job = zoo("producer_died", args=variant)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert "an item from a queue" in report.verdict.summary
    assert "no other thread is left in the process" in report.verdict.summary, report.verdict.summary
    fix = first_fix(report)
    assert fix.title.startswith("The thread that should put items in the queue has died"), fix
    assert "producer_died.py:" in fix.why and "Exception in thread" in fix.why
    # one process, no DataLoader: the causes that need other ranks or workers are not ranked
    ranked = {d.cause for d in report.diagnoses}
    assert not ranked & (NEEDS_A_RANK | {"dataloader"}), (ranked, report.notes)


def test_a_lock_a_dead_thread_took_with_acquire_is_named_leaked(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j01: a checkpoint thread takes ckpt_lock with acquire() and dies of an error
    before release(); the step waits in `with ckpt_lock:`. The fix was "make its errors reach the
    waiter", which leaves the lock held: take it with `with`."""
    job = zoo("producer_died", args=["lock_leaked"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    fix = first_fix(report)
    assert (
        fix.title
        == "Thread 'ckpt-saver' died holding ckpt_lock; take it with `with ckpt_lock:` so an error releases it"
    )


def test_a_queue_whose_producer_died_beside_a_live_thread_names_the_dead_thread_from_the_log(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j09: the prefetch thread died (its traceback in the log) while other threads of
    the process live on (there: an RPC server's). Not "no thread is left": the log's dead thread."""
    job = zoo("producer_died", args=["heartbeat"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    fix = first_fix(report)
    assert fix.title.startswith("Thread 'prefetch' died with an exception; process pid "), fix.title
    assert "an item from a queue at train (" in fix.title, fix.title
    assert "grep -n -A25 'Exception in thread prefetch'" in fix.commands[0], fix.commands


def test_a_socketpair_whose_sending_thread_died_is_a_wait_on_a_thread_not_a_service(knowledge, zoo):  # noqa: F811
    """The ninth hunt's h07: batches come over a socket.socketpair() from a thread that raised. The
    receive's other end is the process's own (ss: same pid), so no service can answer it; only its
    dead thread could. It was external-service 93% with a requests.post timeout as the fix."""
    job = zoo("producer_died", args=["socketpair"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "socket" and end["end"] == "no-thread", end
    assert "data on a socket whose other end this process holds" in report.verdict.summary, report.verdict.summary
    assert "external-service" not in [d.cause for d in report.diagnoses if d.confidence >= 0.2], top(report)
    fix = first_fix(report)
    assert fix.title.startswith("The thread that should send on the socket has died"), fix
    assert "Exception in thread" in fix.commands[0] and "sock.settimeout(seconds)" in fix.commands[1], fix.commands
    assert "q.get(timeout" not in " ".join(fix.commands), fix.commands


def test_an_asyncio_loop_that_no_task_can_wake_is_a_task_that_died(knowledge, zoo):  # noqa: F811
    """The producer task raised; the consumer awaits the queue. The loop waits in epoll_wait with no
    timeout on its own wakeup socket alone, one Python thread: nothing can wake it."""
    job = zoo("producer_died", args=["asyncio"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "task" and end.get("end") == "no-task" and end.get("event_loop") == "asyncio", end
    fix = first_fix(report)
    assert fix.title.startswith("No asyncio task is left to wake the event loop"), fix
    assert "asyncio.TaskGroup()" in fix.commands[-1], fix.commands
    ranked = {d.cause for d in report.diagnoses}
    assert not ranked & (NEEDS_A_RANK | {"dataloader"}), ranked


def test_an_asyncio_event_the_code_never_sets_is_named_with_its_awaiting_line(knowledge, zoo):  # noqa: F811
    """The prefetch task returns without ready.set(); the trainer awaits pf.ready.wait(). Nothing
    died: the fix names the await and the missing set(), read from the job's source, not a dead task."""
    job = zoo("asyncio_flag_unset")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "no-task" and end.get("awaited") == "pf.ready.wait()", end
    assert end.get("completes") == "ready.set()" and end.get("primitive") == "asyncio.Event", end
    source = (spawn.ZOO_DIR / "asyncio_flag_unset.py").read_text().splitlines()
    line = int(end["awaited_at"].rsplit(":", 1)[1].rstrip(")"))
    assert source[line - 1].strip() == "await pf.ready.wait()", end["awaited_at"]
    fix = first_fix(report)
    assert fix.title.startswith("Coroutine train (") and "ready.set()" in fix.title, fix.title
    assert "TaskGroup" not in " ".join(fix.commands), fix.commands


def test_a_queue_whose_producer_process_was_killed_blames_the_dead_child_not_a_dataloader(knowledge, zoo):  # noqa: F811
    """The producer is a multiprocessing.Process, killed by SIGKILL and left a zombie; the job runs no
    DataLoader, so the dead child is no DataLoader worker and its parent's pipe read is a wait on its
    own child (waits=children), not a stalled pipe: no cause is claimed, the dead child is blamed."""
    job = zoo("producer_died", args=["process"])
    child = job.info["producer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert report.verdict.cause not in ("dataloader", "io-stall"), top(report)
    assert report.chain[-1]["pid"] == child and "zombie" in report.chain[-1]["waits_on"]["detail"], report.chain
    assert {d.cause for d in report.diagnoses if d.confidence >= 0.5} == set(), top(report)
    fix = first_fix(report)
    assert fix.origin == "finding" and f"pid {child} has died (signal 9)" in fix.title, fix


def test_a_producer_process_that_raised_is_named_with_its_logged_error_and_the_fix_shows_without_a_cause(
    knowledge,
    zoo,  # noqa: F811
):
    """The producer process raises: multiprocessing prints "Process shard-reader:" and the traceback,
    exit code 1. The dead child's fix quotes that error and where it was raised; no cause is claimed,
    and the text report still shows the fix (for what the job waits on) and does not say "attach"."""
    from debug_stuck.render.text import render_text

    job = zoo("producer_died", args=["process_raises"])
    child = job.info["producer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert report.chain[-1]["pid"] == child and "zombie" in report.chain[-1]["waits_on"]["detail"], report.chain
    assert {d.cause for d in report.diagnoses if d.confidence >= 0.5} == set(), top(report)
    fix = first_fix(report)
    assert fix.origin == "finding" and f"pid {child} has died (exit code 1)" in fix.title, fix
    assert "'shard-reader'" in fix.why and "ValueError: record 3: unexpected end of data" in fix.why, fix.why
    assert "producer_died.py:" in fix.why and "says why it died" not in fix.why, fix.why
    text = render_text(report)
    assert "Fix (for what the job waits on; no cause is named):" in text and fix.title in text, text
    assert "attach to the job" not in text, text


# -- waits that end at another thread, a child's pipe, a lock another process holds -------------------


def test_a_child_waiting_before_it_reads_its_own_childs_output_is_the_one_told_to_read(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j22: the trainer waits for a prep script, which waits for its helper before
    reading its output. The fix named the trainer as the one waiting before reading."""
    job = zoo("subprocess_output", args=["nested"])
    prep, child = job.info["prep_pid"], job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert [h["pid"] for h in report.chain][:3] == [job.proc.pid, prep, child], report.chain
    fix = first_fix(report)
    assert fix.title.startswith(f"Process pid {prep} waits for its child {child} before reading"), fix


def test_a_parent_waiting_before_it_reads_its_childs_output_is_told_to_read_while_waiting(knowledge, zoo):  # noqa: F811
    job = zoo("subprocess_output")
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    hops = [(h["pid"], h["waits_on"]["kind"], h["waits_on"].get("op")) for h in report.chain]
    assert hops[:2] == [(job.proc.pid, "child", "wait-child"), (child, "pipe", "write")], report.chain
    fix = first_fix(report)
    assert fix.title.startswith(f"Process pid {job.proc.pid} waits for its child {child} before reading"), fix
    assert "communicate(" in fix.commands[-1], fix
    # the child's own command, not a placeholder; and not "log to a file": the parent captures that output
    argv = shlex.split(next(p["cmdline"] for p in report.to_dict()["processes"] if p["pid"] == child))
    assert f"cmd = {argv!r}" in fix.commands[-1], fix.commands
    left_out = {f["title"]: f["why"] for f in report.diagnoses[0].fixes_left_out}
    assert "subprocess.PIPE" in left_out.get("Log to a file instead of a pipe", ""), left_out
    # Reading the stacks must not pause the child: a pause cuts its half-done write short, CPython
    # drops the rest, and the job would go on with its output silently truncated.
    with open(f"/proc/{child}/wchan") as wchan:
        assert spawn.proc_state(child) == "S" and "pipe_write" in wchan.read(), "the child's write ended"
    assert job.proc.poll() is None and "read " not in job.log_text(), job.log_text()[-500:]
    assert any(f"process {child} was read without pausing it" in note for note in report.notes), report.notes


def test_a_process_that_cannot_exit_waits_for_its_pool_thread_whose_upload_never_ends(knowledge, zoo):  # noqa: F811
    job = zoo("exit_upload_thread")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "external-service", top(report)
    first, last = report.chain[0], report.chain[-1]
    assert first["waits_on"]["kind"] == "thread" and first["waits_on"].get("exit") == "yes", report.chain
    assert "before the interpreter can exit" in first["waits_on"]["detail"], first
    assert last["thread"]["name"].startswith("metrics-upload") and last["waits_on"]["kind"] == "socket", last
    assert last["waits_on"]["object"].endswith(f":{job.info['port']}"), last
    fix = first_fix(report)
    assert f"127.0.0.1:{job.info['port']}" in fix.title and "exit_upload_thread.py:" in fix.why, fix


def test_a_cache_lock_another_live_process_holds_names_the_holder_not_a_stale_file(knowledge, zoo):  # noqa: F811
    pytest.importorskip("filelock")
    job = zoo("lock_held_elsewhere")
    holder = job.info["holder_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    lock = report.chain[0]["waits_on"]
    assert (lock["kind"], lock.get("end"), lock["object"]) == ("lock", "held", job.info["lock_path"]), lock
    assert report.chain[-1]["pid"] == holder, report.chain  # the chain goes on to what the holder does
    assert report.culprit is not None and report.culprit["pid"] == holder, report.culprit
    fix = first_fix(report)
    assert fix.title == f"The lock on {job.info['lock_path']} is held by pid {holder}: let it finish, or stop it"
    assert not any(c.startswith("rm ") for c in fix.commands), fix.commands  # removing it frees nothing


def test_a_cache_lock_held_by_a_process_outside_the_job_makes_that_process_the_culprit(knowledge, zoo):  # noqa: F811
    """A leftover run of another session holds the lock and sleeps: the chain ends at the job's lock
    wait, and the culprit is the holder, named as no process of the job."""
    pytest.importorskip("filelock")
    job = zoo("lock_held_elsewhere", args=["outside"])
    holder = job.info["holder_pid"]
    try:
        report = diagnose(knowledge, job.proc.pid)
        assert report.verdict.hung is True, top(report)
        assert [hop["pid"] for hop in report.chain] == [job.proc.pid], report.chain
        assert report.culprit is not None and report.culprit["pid"] == holder, report.culprit
        assert "(not a process of this job) holds the lock on" in report.culprit["reason"], report.culprit
        # the job takes it with filelock: its own timeout, not a hand-written fcntl loop
        code = "\n".join(first_fix(report).commands)
        assert f'FileLock("{job.info["lock_path"]}", timeout=600)' in code and "fcntl" not in code, code
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(holder, signal.SIGKILL)  # by its pid: it left the job's tree (the zoo also stops its group)


def test_a_lock_held_by_another_process_that_writes_is_waiting_its_turn(knowledge, zoo):  # noqa: F811
    """The holder, no process of the job, downloads into the locked cache (64 KiB every 50 ms): the job
    waits its turn. Undecided, nobody blamed; a holder that writes nothing is still a hang (above)."""
    job = zoo("lock_held_elsewhere", args=["writing"])
    holder = job.info["holder_pid"]
    try:
        report = diagnose(knowledge, job.proc.pid)
        summary = undecided_summary(report)
        assert (
            f"waits for the lock on {job.info['lock_path']} that pid {holder} (not a process of this job) holds "
            "while it writes" in summary
        ), summary
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(holder, signal.SIGKILL)  # by its pid: it left the job's tree (the zoo also stops its group)


def test_a_torchrun_agent_waiting_for_its_other_node_gets_the_rendezvous_fixes_with_its_own_flags(
    knowledge,
    zoo,  # noqa: F811
    tmp_path,
):
    pytest.importorskip("torch")
    port = spawn.free_port()
    script = tmp_path / "train.py"
    script.write_text("import torch.distributed as dist\n\ndist.init_process_group('gloo')\n")
    argv = [
        *(sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1"),
        *("--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=zoo", str(script)),
    ]
    job = zoo("elastic_agent", argv=argv)

    def sleeping_in_the_rendezvous_loop() -> bool:
        with open(f"/proc/{job.proc.pid}/wchan") as wchan:
            return wchan.read() == "hrtimer_nanosleep" and spawn.proc_state(job.proc.pid) == "S"

    wait_for(sleeping_in_the_rendezvous_loop, "the agent's rendezvous retry loop", job)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "rendezvous", top(report)
    from debug_stuck.advice import advise

    fixes = advise(report, load_knowledge()).diagnoses[0].fixes
    # torch's own retry loop is not "the loop at _delay waits for something": the playbook's fixes lead
    assert not fixes[0].title.startswith("The loop at"), fixes[0]
    relaunch = next(c for f in fixes for c in f.commands if c.startswith("torchrun "))
    assert f"--nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:{port}" in relaunch


def test_a_joblib_worker_blocked_on_its_shard_is_followed_from_the_polling_parent(knowledge, zoo):  # noqa: F811
    pytest.importorskip("joblib")
    job = zoo("joblib_shards")
    worker = job.info["worker_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "io-stall", top(report)
    roles = {p["pid"]: p["role"] for p in report.processes}
    assert roles[worker] == "worker-process", roles  # a loky worker: the pool's, not a rank nor a DataLoader's
    first, last = report.chain[0], report.chain[-1]
    assert first["pid"] == job.proc.pid and first["waits_on"]["kind"] == "worker", report.chain
    assert last["pid"] == worker and last["waits_on"]["object"] == job.info["fifo"], last
    assert report.culprit["pid"] == worker, report.culprit
    fix = first_fix(report)
    assert fix.title.startswith(f"Nothing will ever write {job.info['fifo']}"), fix
    assert "joblib/parallel.py" not in fix.why  # joblib's own frames are not the job's line


def test_a_datasets_map_worker_blocked_on_its_example_is_followed_from_the_polling_parent(knowledge, zoo):  # noqa: F811
    pytest.importorskip("datasets")
    job = zoo("datasets_map", ready_timeout=120)
    worker = job.info["worker_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "io-stall", (top(report), report.chain)
    first, last = report.chain[0], report.chain[-1]
    # the parent is caught in the Manager queue's socket read, a poll: the chain goes on to the worker
    # in the job's own code, not to the Manager's server process
    assert first["pid"] == job.proc.pid and first["waits_on"]["kind"] == "worker", report.chain
    assert last["pid"] == worker and last["waits_on"]["object"] == job.info["fifo"], last
    assert "waits for it in iflatmap_unordered" in report.verdict.summary, report.verdict.summary
    assert first_fix(report).title.startswith(f"Nothing will ever write {job.info['fifo']}")


def test_a_datasets_map_whose_workers_all_compute_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """map(num_proc=2) over examples of a minute of CPU each, progress bars off: the parent polls its
    queue while both pool workers compute. Slow, not stuck: undecided, nobody blamed."""
    pytest.importorskip("datasets")
    job = zoo("datasets_map", args=["slow"], ready_timeout=120)
    report = diagnose(knowledge, job.proc.pid)
    summary = undecided_summary(report)
    assert f"pid {job.proc.pid} (rank) waits for its pool worker processes while all 2 of them compute" in summary
    assert any(f"py-spy dump --locals --pid {pid}" in summary for pid in job.info["workers"]), summary


def test_a_multiprocessing_barrier_whose_other_party_still_computes_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The eighteenth hunt's h04: worker 0 waits at the round's Barrier while worker 1, with the long
    shard, computes. It was HUNG, cpu-spin 90%, worker 0 the culprit: the barrier was not followed."""
    pytest.importorskip("torch")
    job = zoo("mp_barrier_slow_party", ready_timeout=120)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is not True, report.verdict.summary
    assert report.culprit is None, report.culprit
    hops = [hop["pid"] for hop in report.chain]
    assert hops[-2:] == [job.info["waiting_worker"], job.info["computing_worker"]], report.chain


def test_a_multiprocessing_barrier_whose_other_party_died_names_the_dead_child(knowledge, zoo):  # noqa: F811
    job = zoo("mp_barrier_dead")
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    # the eleventh hunt's j15 (an mp.Event whose setter crashed): no cause was named
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    first, last = report.chain[0], report.chain[-1]
    assert first["waits_on"]["detail"] == f"waits at a multiprocessing Barrier for pid {child}", first
    assert last["pid"] == child and last["waits_on"]["kind"] == "process", last
    assert report.culprit["pid"] == child, report.culprit
    # no DataLoader in this job: the child is a worker process, and the advice is not the DataLoader's
    assert report.verdict.summary.startswith(f"Worker process pid {child} has exited"), report.verdict.summary
    fix = first_fix(report)
    assert fix.title.startswith(f"Worker process pid {child} has died (exit code 1)"), fix
    assert "ProcessPoolExecutor" in fix.why and "DataLoader" not in fix.why, fix.why


@pytest.mark.parametrize("mode", ["event", "pipe"])
def test_a_child_that_returned_early_is_named_as_exited_not_crashed(knowledge, zoo, mode):  # noqa: F811
    """The ninth hunt's h10: the child returns early (its shards exist) without the Event's set() or
    the Pipe's send(), exit code 0. The culprit was right, the fix spoke of a crash and the OOM killer.
    For the Pipe (a socketpair the parent still holds both ends of) it was external-service 90%."""
    job = zoo("mp_barrier_dead", args=[mode])
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.culprit["pid"] == child, top(report)
    assert report.chain[-1]["pid"] == child, report.chain
    assert "external-service" not in [d.cause for d in report.diagnoses if d.confidence >= 0.2], top(report)
    fix = first_fix(report)
    assert fix.title.startswith(f"Worker process pid {child} has exited (exit code 0)"), fix
    assert "returned normally" in fix.why and "Killed process" not in " ".join(fix.commands), fix


def test_a_checkpoint_written_into_a_pipe_whose_reader_exited_names_the_dead_child(knowledge, zoo):  # noqa: F811
    """The ninth hunt's h09: torch.save into an os.pipe() whose compressor child exited at once; the
    parent kept its copy of the read end, so its write blocks instead of failing. It was read as slow
    storage (checkpoint-save 93%, "stop and resume"), the reader named as the job itself, the dead
    child not at all."""
    job = zoo("pipe_reader_died")
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    first, last = report.chain[0]["waits_on"], report.chain[-1]
    assert first["kind"] == "pipe" and first["end"] == "child-exited" and first["peer"] == "self", first
    assert last["pid"] == child and report.culprit["pid"] == child, (report.chain, report.culprit)
    fix = first_fix(report)
    assert fix.title.startswith(
        f"Worker process pid {child} has died (exit code 1); process pid {job.proc.pid} kept "
    ), fix
    assert "os.close(r)" in fix.commands[0] and "BrokenPipeError" in fix.why, fix


def test_a_captured_command_that_left_a_process_running_names_that_process(knowledge, zoo):  # noqa: F811
    """The ninth hunt's h06: subprocess.run(capture_output=True) of a shell that starts `sleep 3600 &`
    and exits. The sleep, re-parented to init, holds the pipe the job reads to its end. It was "waits
    in poll() on pipe", no writer found, and a torch.compile fix first."""
    job = zoo("subprocess_output", args=["background"])
    holder = job.info["holder_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.culprit["pid"] == holder, top(report)
    # a process that never ends holds the pipe: no storage (the twelfth hunt's j06 said io-stall 84%)
    assert report.verdict.cause == "thread-deadlock", top(report)
    assert f"the writer is pid {holder} (sleep)" in report.chain[0]["waits_on"]["detail"], report.chain
    assert any(f"pid {holder} (sleep 3600) is taken as part of the job" in n for n in report.notes), report.notes
    # taken in for its pipe, not watched as a step loop (its hour's sleep cost 6 s of watching)
    taken = next(p for p in report.processes if p["pid"] == holder)
    assert taken["adopted_by"] == job.proc.pid and "main_wakes" not in taken, taken
    fix = first_fix(report)
    assert fix.title.startswith(f"The background process pid {holder} (sleep) holds open the pipe"), fix
    assert "sleep 3600 > /dev/null 2>&1 &" in fix.commands and f"kill {holder}" in fix.commands, fix.commands
    assert f"by pid {job.info['child_pid']}, the child" in fix.why, fix.why


def test_a_thread_joined_by_the_holder_of_the_lock_it_waits_for_names_both_sides(knowledge, zoo):  # noqa: F811
    """The ninth hunt's h11: the step joins its watchdog Timer under state_lock; the Timer's callback
    waits for state_lock. Only the callback's side was named (the Timer called "the pool thread"), and
    the fix was a generic timeout on Events and futures."""
    job = zoo("timer_join_lock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "lock-cycle" and end["end"] == "join-under-lock" and end["lock"] == "state_lock", end
    callback, joiner = end["threads"]
    assert (callback["function"], callback["line"]) == ("on_slow_step", job.info["callback_line"]), end
    assert (joiner["name"], joiner["line"]) == ("MainThread", job.info["join_line"]), end
    fix = first_fix(report)
    assert fix.title == f"Join thread {callback['name']!r} after releasing state_lock", fix
    assert "with state_lock:" in fix.commands[0] and "\ntimer.join()  # outside the lock" in fix.commands[0], fix


@pytest.mark.parametrize(
    "scenario, title, command",
    [
        ("both_ways", "writes all the input of its child pid {child}", "proc.communicate(input=data)"),
        ("stderr_full", "reads one pipe of its child {child} to the end", "proc.communicate(timeout=3600)"),
    ],
)
def test_a_job_stuck_on_its_childs_pipes_is_told_to_use_communicate(knowledge, zoo, scenario, title, command):  # noqa: F811
    """both_ways, the tenth hunt's j02: Popen(stdin=PIPE, stdout=PIPE), all the input written before any
    output is read (its first fix took the job for a background process and said to kill it).
    stderr_full, the twelfth hunt's j04: stdout read to its end first while the child blocks on its full
    stderr pipe (it was the generic "break the cycle")."""
    job = zoo("subprocess_output", args=[scenario])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    fix = first_fix(report)
    assert fix.title.startswith(f"Process pid {job.proc.pid} " + title.format(child=job.info["child_pid"])), fix
    assert command in fix.commands[0], fix.commands
    advice = advise_all(report)
    assert not any(f"kill {job.proc.pid}" in command for fix in advice for command in fix.commands), advice


def test_an_asyncio_wait_for_a_child_whose_output_is_unread_goes_on_to_the_child(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j04: `await proc.wait()` with stdout=PIPE before reading; the loop idles in
    epoll, asyncio's child watcher thread waits for the child. The chain stopped at the loop."""
    job = zoo("subprocess_output", args=["asyncio_wait"])
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    hops = [(h["pid"], h["waits_on"]["kind"]) for h in report.chain]
    assert hops == [(job.proc.pid, "child"), (child, "pipe"), (job.proc.pid, "cycle")], report.chain
    assert "asyncio's child watcher thread 'asyncio-waitpid-" in report.chain[0]["waits_on"]["detail"], report.chain
    fix = first_fix(report)
    assert fix.title.startswith(f"Process pid {job.proc.pid} waits for its child {child} before reading"), fix


def test_a_reply_left_in_the_childs_buffer_is_told_to_flush(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j15: the child answers with print() into a pipe and waits for the next request;
    the job waits in readline(). It was the generic "break the cycle"."""
    job = zoo("subprocess_output", args=["reply_buffered"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    fix = first_fix(report)
    assert fix.title.startswith(f"Process pid {job.proc.pid} waits for a reply from its child {job.info['child_pid']}")
    assert "print(reply, flush=True)" in fix.commands[0] and "PYTHONUNBUFFERED=1" in fix.commands[1], fix.commands


def test_a_reply_the_child_flushed_but_the_parent_reads_more_of_is_a_size_mismatch(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j04: the decoder child flushes each 112x112 frame; the trainer reads 224x224.
    The fix said the reply sat in a buffer, which was false: the child flushes."""
    job = zoo("subprocess_output", args=["reply_short"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    fix = first_fix(report)
    assert fix.title == (
        f"Process pid {job.proc.pid} waits for more of a reply than its child {job.info['child_pid']} sends: "
        "the two sides disagree on a message's size"
    ), fix.title


def test_a_thread_asking_again_for_a_lock_it_holds_is_told_the_lock_is_not_reentrant(knowledge, zoo):  # noqa: F811
    job = zoo("self_lock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    fix = first_fix(report)
    assert (
        fix.title == f"Process pid {job.proc.pid} waits for `_lock`, which it already holds: a Lock is not re-entrant"
    )
    assert re.search(
        r"took `_lock` in record \(self_lock\.py:\d+\) and, still holding it, asks for it\s+again in flush", fix.why
    )
    assert "_lock = threading.RLock()" in fix.commands[-1], fix.commands


def test_a_second_flock_of_a_file_its_own_process_holds_is_a_self_deadlock_not_a_checkpoint_write(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j25: `with locked(LOCK)` inside `with locked(LOCK)`, each a new open() and
    flock. It was checkpoint-save 91% with "stop and resume" (a resumed run hangs again)."""
    job = zoo("flock_nested")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "lock" and end.get("end") == "self-held", report.chain
    assert re.search(r"waits at locked \(\S*flock_nested\.py:\d+\) for `locked\(LOCK\)`, which it took itself at "
                     r"save_checkpoint \(", end["detail"]), end  # fmt: skip
    fix = first_fix(report)
    assert fix.title == (
        f"Process pid {job.proc.pid} waits for the lock on {job.workdir / 'run.lock'} that it took itself: a second "
        "flock of the same file blocks its own holder"
    ), fix.title
    assert re.search(r"asks for it\s+again in update_index \(", fix.why), fix.why
    assert all(d.cause != "checkpoint-save" or d.confidence < 0.1 for d in report.diagnoses), top(report)


def test_a_download_whose_body_stalled_part_way_is_not_called_a_server_that_never_answered(knowledge, zoo):  # noqa: F811
    pytest.importorskip("requests")
    job = zoo("stalled_download")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "external-service", top(report)
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "socket" and end.get("body") == "stalled", end
    assert "sent part of its answer and stopped" in report.verdict.summary, report.verdict.summary
    fix = first_fix(report)
    assert fix.title == f"127.0.0.1:{job.info['port']} stopped sending part-way; give the call iter_content() a timeout"
    assert "stream=True, timeout=(10, 60)" in fix.commands[-1], fix.commands


def test_a_slow_download_still_receiving_is_progressing_not_a_stopped_peer(knowledge, zoo):  # noqa: F811
    """The same read as a stalled body, but the server keeps sending (16 KiB every 200 ms): the
    connection's bytes received grow between two readings of tcp_info, so the job progresses."""
    pytest.importorskip("requests")
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) reads the connection's tcp_info")
    job = zoo("stalled_download", args=["slow"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False and report.verdict.state == "progressing", top(report)
    said = " ".join(report.verdict.state_reasons)  # the summary shows two reasons: the file it writes may come first
    assert f"receives data on its connection to 127.0.0.1:{job.info['port']}" in said, said
    end = report.chain[-1]["waits_on"]
    assert "end" not in end and "data still arrives" in end["detail"], end


def test_a_slow_stream_read_by_an_asyncio_event_loop_is_progressing(knowledge, zoo):  # noqa: F811
    """asyncio waits on its connections in epoll_wait, not in a read: the connections the event loop
    watches are read from tcp_info too, and 20 KB/s arriving is a transfer under way."""
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) reads the connection's tcp_info")
    job = zoo("stalled_download", args=["asyncio_slow"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False and report.verdict.state == "progressing", top(report)
    said = " ".join(report.verdict.state_reasons)
    assert f"receives data on its connection to 127.0.0.1:{job.info['port']}" in said, said
    end = report.chain[-1]["waits_on"]
    assert end.get("receiving") == "yes" and "end" not in end, end
    assert "waits in epoll_wait() on a connection to" in end["detail"] and "data still arrives" in end["detail"], end


def test_four_asyncio_streams_each_trickled_a_kilobyte_at_a_time_are_progressing(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's h03: an object store trickles each of four streams 1 KiB at a time. It was
    HUNG, "the peer never answers": 2 KiB per connection in the half-second gap was below the 4 KiB
    a transfer needed. A keep-alive is tens of bytes; 512 is the floor now."""
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) reads the connection's tcp_info")
    job = zoo("stalled_download", args=["asyncio_trickle"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False and report.verdict.state == "progressing", top(report)
    said = " ".join(report.verdict.state_reasons)
    assert f"receives data on its connection to 127.0.0.1:{job.info['port']}" in said, said


def test_uploader_threads_blocked_sending_to_a_slow_reader_are_progressing(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's h05: pool threads sendall() shards to a store that reads each connection
    slowly; the main thread waits in as_completed. It was HUNG, thread-deadlock 82%: a blocked send
    was not measured. Bytes leaving between two readings of tcp_info are an upload under way."""
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) reads the connection's tcp_info")
    job = zoo("upload_slow_reader")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False and report.verdict.state == "progressing", top(report)
    said = " ".join(report.verdict.state_reasons)
    assert f"sends data on its connection to 127.0.0.1:{job.info['port']}" in said, said


# what the summary of an undecided busy_helpers scenario says ({pid}: the job's, {child}: its child's)
UNDECIDED_SAYS = {
    "pool_imap": ["pid {pid} (rank) waits for its pool worker processes while all 2 of them compute"],
    "prefetch_thread": ["pid {pid} (rank) waits for its thread prefetcher, which computes"],
    "child_computes": [
        "pid {pid} (rank) waits for its child process pid {child} (",
        "py-spy dump --locals --pid {child}",
    ],
    "join_blas": ["pid {pid} (rank) waits for its thread feature-extractor, which computes"],
    "mp_child_computes": ["pid {pid} (rank) waits for its child process pid {child} ("],
    "asyncio_child": ["pid {pid} (rank) waits for its child process pid {child} ("],
    "socket_child": ["pid {pid} (rank) waits for its connection's peer pid {child} ("],
    "lock_holder_computes": ["pid {pid} (rank) waits for its lock's holder pid {child} ("],
    "polls_child": [
        "pid {pid} (rank) sleeps in a loop at wait_for_scores (assistant/zoo/busy_helpers.py:",
        "while its child process pid {child} (",
    ],
    "polls_service": [
        "pid {pid} (rank) sleeps in a loop at fetch_batch (assistant/zoo/busy_helpers.py:",
        "between calls to 127.0.0.1:",
        "it retries or polls a service that is up",
    ],
}


@pytest.mark.parametrize(
    "scenario",
    ["threads", "threads_stuck", "pool_imap", "prefetch_thread", "child_computes", "child_writes", "join_blas",
     "polls_child", "polls_service", "mp_child_computes", "asyncio_child", "socket_child", "lock_holder_computes"],
)  # fmt: skip
def test_a_main_thread_waiting_on_helpers_that_work_is_not_called_hung(knowledge, zoo, scenario):  # noqa: F811
    """Every thread of a pool, every worker of a Pool.imap, its own prefetcher thread, or the one child
    it runs computing its task: undecided, with what would tell, nobody blamed. One task looping while
    the other worker idles: hung on that task. A child that writes: progress."""
    if scenario == "join_blas":
        pytest.importorskip("numpy")
    if scenario == "mp_child_computes":
        pytest.importorskip("torch")
    if scenario == "polls_service" and shutil.which("ss") is None:
        pytest.skip("ss (iproute2) reads the connection's tcp_info")
    job = zoo("busy_helpers", args=[scenario])
    report = diagnose(knowledge, job.proc.pid)
    summary = report.verdict.summary
    if scenario in (
        "pool_imap",
        "child_computes",
        "child_writes",
        "polls_child",
        "mp_child_computes",
        "asyncio_child",
        "socket_child",
        "lock_holder_computes",
    ):
        # one trainer and the processes it started, none a rank: nothing to meet in a collective
        assert not {"collective", "network", "rendezvous"} & {d.cause for d in report.diagnoses}, top(report)
    if scenario == "threads":
        assert report.verdict.hung is None, top(report)
        assert f"pid {job.proc.pid} (rank) waits for its thread pool workers while all 2 of them compute" in summary
        assert f"py-spy dump --locals --pid {job.proc.pid}" in summary, summary
        assert report.culprit is None and "Most likely" not in summary, (report.culprit, summary)
    elif scenario in UNDECIDED_SAYS:
        undecided_summary(report)
        for said in UNDECIDED_SAYS[scenario]:
            text = said.format(pid=job.proc.pid, child=job.info.get("child"))
            assert text in summary, (text, summary)
    elif scenario == "threads_stuck":
        # its loop may change line between two samples (then "too little was sampled"): never progress,
        # never the busy-helpers rule, and the chain ends at the task that loops
        assert report.verdict.hung is not False and "while all" not in summary, top(report)
        assert "keeps running, never waiting, at preprocess" in summary, summary
    else:
        assert report.verdict.hung is False and report.verdict.state == "progressing", top(report)
        assert f"pid {job.info['child']} (other) wrote" in summary, summary


def test_one_long_call_of_a_librarys_compute_routine_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """numpy's convolve of two million-sample arrays: minutes in one C call, the stack frozen inside
    numpy at 100% CPU, log silent. A long computation looks like that; undecided, nobody blamed."""
    pytest.importorskip("numpy")
    job = zoo("library_compute")
    report = diagnose(knowledge, job.proc.pid)
    summary = undecided_summary(report)
    assert summary.startswith(f"Not judged hung from this window: pid {job.proc.pid} (rank) computes inside "
                              "convolve (numpy/"), summary  # fmt: skip
    assert f"py-spy dump --locals --pid {job.proc.pid}" in summary, summary


@pytest.mark.parametrize(
    "scenario, library",
    [("torch_svd", "libtorch_cpu.so"), ("numpy_matmul", "openblas")],
)
def test_a_long_native_call_made_from_the_jobs_own_line_is_not_called_hung(knowledge, zoo, scenario, library):  # noqa: F811
    """torch.linalg.svd, or numpy's matmul, called straight from the job's own line: no Python frame of
    the library, its BLAS under that line at 200% CPU. Seen by hand: hung, cpu-spin 93%, "keeps running,
    never waiting, at <module>". py-spy --native shows the library's machine code: undecided."""
    if scenario == "torch_svd":
        pytest.importorskip("torch")
    job = zoo("library_compute", args=[scenario])
    report = diagnose(knowledge, job.proc.pid)
    summary = undecided_summary(report)
    assert summary.startswith(f"Not judged hung from this window: pid {job.proc.pid} (rank) computes inside "), summary
    inside = summary.split("computes inside ", 1)[1].split(" for the whole window", 1)[0]
    assert library in inside and f"called from {scenario} (" in inside, summary


def test_a_large_json_parse_on_the_jobs_own_line_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """json.loads of a 72 MB document from the job's own line: the standard library's parser, not a
    spin. By hand first (json.load of a 770 MB annotation file, 15 s): hung, cpu-spin 93%, or gc-pause
    93% when a sample caught the collector the parser's allocations set off. Undecided now."""
    job = zoo("stdlib_parse")
    report = diagnose(knowledge, job.proc.pid)
    summary = undecided_summary(report)
    expected = (
        f"Not judged hung from this window: pid {job.proc.pid} (rank) computes inside raw_decode (json/decoder.py:"
    )
    assert summary.startswith(expected), summary


def test_a_pure_python_pass_in_the_jobs_own_for_loop_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The eighth hunt's healthy_pyprep (counting character pairs for 305 s) was hung, cpu-spin 93%,
    on half its calls: the samples that all caught `pairs[a + b] += 1` read as a spin. A frozen line in
    the body of the job's own `for` loop is a pass over data: undecided (a spin is a `while`, as
    own_package_spin's stays hung), whether the samples moved within the loop or not, every time."""
    job = zoo("own_for_pass")
    for _ in range(3):
        report = diagnose(knowledge, job.proc.pid)
        summary = undecided_summary(report)
        assert f"pid {job.proc.pid} (rank)" in summary, summary
        assert "in its own loop `for " in summary or "loops in one place" in summary, summary


def test_a_builtin_sort_calling_the_jobs_comparator_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The ninth hunt's s01_sort_cmp (a sort with a Python comparator, silent for minutes) was hung,
    cpu-spin 93%, "Fix the loop at cmp", on one call in three: every sample caught the comparator's
    one line. That line calls nothing and no loop of its function holds it, and its caller's line
    passes it to a builtin (`sorted(..., key=cmp_to_key(by_length))`): each sample is another of
    the builtin's calls, a pass over the data. Undecided, every time."""
    job = zoo("sort_callback")
    for _ in range(3):
        report = diagnose(knowledge, job.proc.pid)
        assert report.verdict.hung is not True, top(report)
        if report.verdict.hung is None:  # samples that all caught one line; progressing when they moved
            summary = undecided_summary(report)
            assert f"pid {job.proc.pid} (rank)" in summary, summary
            assert "`sorted(order, key=functools.cmp_to_key(by_length))`" in summary, summary
            assert "for each item" in summary, summary


def test_a_long_encode_on_the_tokenizers_pool_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The main thread waits on rayon's latch while the pool's native threads (not listed by py-spy)
    compute: the process's CPU says they work. Undecided, nobody blamed; the fork case, where the
    pool's threads are gone and nothing computes, stays hung (test_dataloader_workers_forked_after_...)."""
    pytest.importorskip("tokenizers")
    job = zoo("tokenizers_encode")
    report = diagnose(knowledge, job.proc.pid)
    summary = undecided_summary(report)
    assert (
        f"pid {job.proc.pid} (rank) waits for rayon's thread pool (used by tokenizers' parallel encode), whose "
        "threads compute (" in summary
    ), summary
    assert f"top -H -p {job.proc.pid}" in summary, summary


def test_a_process_pool_future_follows_to_the_worker_and_an_idle_feeder_is_no_evidence(knowledge, zoo):  # noqa: F811
    job = zoo("process_pool_shard")
    worker = job.info["worker_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "io-stall", top(report)
    assert [h["pid"] for h in report.chain] == [job.proc.pid, worker], report.chain
    assert report.chain[-1]["waits_on"]["object"] == job.info["fifo"]
    # the executor's queue feeder thread idles in its wait for the next item: not "cannot finish writing"
    details = [e.detail for d in report.diagnoses for e in d.evidence]
    assert not any("feeder thread cannot finish writing" in d for d in details), details


def test_a_spin_in_the_jobs_own_package_named_like_a_library_is_the_jobs_own_loop(knowledge, zoo):  # noqa: F811
    job = zoo("own_package_spin")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "cpu-spin", top(report)
    fix = first_fix(report)
    # py-spy's short name is HF's too (datasets/...): under the entry script's folder it is the job's
    assert fix.title == "Fix the loop at wait_for_shard (datasets/shards.py:6): it spins and never ends", fix.title
    assert f"py-spy dump --locals --pid {job.proc.pid}" in fix.commands, fix.commands


def test_tasks_waiting_on_their_own_thread_pool_are_named_an_exhausted_pool(knowledge, zoo):  # noqa: F811
    job = zoo("pool_nested_wait")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "pool" and end["object"] == "prefetch" and end.get("end") == "exhausted", report.chain
    assert "all 2 of that pool's workers do the same" in end["detail"], end
    fix = first_fix(report)
    assert fix.title == "A task of thread pool prefetch waits for another task of the same pool: none can start"
    assert re.search(r"waits at load \(\S*pool_nested_wait\.py:\d+\)", fix.why), fix.why


def test_a_rank_that_raised_but_cannot_exit_for_its_idle_thread_is_the_culprit(knowledge, zoo):  # noqa: F811
    """The launch script takes no part (its ranks carry RANK in their environment): it is the
    launcher, not a rank to blame; the rank that raised waits at exit for its non-daemon thread."""
    pytest.importorskip("torch")
    job = zoo("rank_exit_thread", ready_timeout=120)
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, job.proc.pid)
    end = launched_ranks_blame_rank1(report, job.proc.pid, rank0, rank1)
    assert end["pid"] == rank1 and end["waits_on"].get("end") == "exit-idle-thread", report.chain
    assert "non-daemon thread 'metrics-uploader', which idles in get()" in end["waits_on"]["detail"], end
    fix = first_fix(report)
    title = (
        f"Rank 1 (pid {rank1}) cannot exit: its thread metrics-uploader waits for work or a stop that will never come"
    )
    assert fix.title == title, fix.title
    assert re.search(r"waits at upload \(\S*rank_exit_thread\.py:\d+\)", fix.why), fix.why
    assert f"rank 0 (pid {rank0}) waits for it" in fix.why, fix.why


@pytest.mark.timeout(180)
def test_dataloader_workers_forked_after_tokenizers_ran_its_pool_wait_for_threads_they_do_not_have(knowledge, zoo):  # noqa: F811
    """The workers' wait is rayon's (py-spy prints its Rust v0 name mangled): a pool whose threads a
    fork did not copy. The fix is spawn, or TOKENIZERS_PARALLELISM=false before the first encode."""
    pytest.importorskip("tokenizers")
    job = zoo("tokenizers_fork", ready_timeout=120)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]
    assert end["pid"] in job.info["workers"] and end["waits_on"]["end"] == "fork-pool", report.chain
    detail = end["waits_on"]["detail"]
    assert detail.startswith("waits for rayon's thread pool (used by tokenizers' parallel encode) at "), detail
    assert f"whose threads pid {job.proc.pid} (it runs" in detail, detail
    first = first_fix(report)
    assert first.title.startswith(f"DataLoader worker pid {end['pid']} waits for a thread pool that pid {job.proc.pid}")
    assert "TOKENIZERS_PARALLELISM=false" in first.why and f"py-spy dump --native --pid {end['pid']}" in first.commands


@pytest.mark.timeout(240)
def test_hf_trainer_evaluating_with_a_silent_log_is_progressing_in_validation_not_a_save(knowledge, zoo):  # noqa: F811
    """Every layer of a transformers 5 model runs its forward through forward_with_checkpointing
    (activation checkpointing): the pass is an evaluation, never a checkpoint save."""
    pytest.importorskip("transformers")
    job = zoo("hf_evaluate", ready_timeout=180)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is False and report.verdict.state == "progressing", top(report)
    assert report.verdict.phase == "validation", top(report)
    assert "checkpoint" not in report.verdict.summary, report.verdict.summary


def test_dataloader_workers_waiting_on_the_jobs_own_server_are_the_culprit_not_the_server(knowledge, zoo):  # noqa: F811
    """The server is a child of the trainer too, forked before the workers: the wait for a batch leads
    to a DataLoader worker in its worker loop (was: the server, "blocked in accept()", the culprit)."""
    pytest.importorskip("torch")
    job = zoo("dataloader_http")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "external-service", top(report)
    culprit = report.culprit
    assert culprit is not None and culprit["pid"] != job.info["server_pid"], culprit
    workers = {p.pid for p in job.children_of(job.proc.pid)} - {job.info["server_pid"]}
    assert culprit["role"] == "dataloader-worker" and culprit["pid"] in workers, culprit
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "socket" and end["object"] == f"127.0.0.1:{job.info['port']}", end


def test_a_signal_handler_taking_the_lock_its_interrupted_step_holds_is_a_self_deadlock(knowledge, zoo):  # noqa: F811
    """A SIGUSR1 handler (a preemption save) runs inside the step that holds `state_lock` and asks for
    it again: the chain ends at the lock the thread holds itself; not a slow save to storage."""
    job = zoo("signal_self_lock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "self-held", report.chain
    assert re.search(
        r"for `state_lock`, which the code its signal handler on_preempt interrupted took at main "
        r"\(\S*signal_self_lock\.py:\d+\)",
        end["detail"],
    ), end
    # the eleventh hunt's j17: the fix was an RLock, which lets the handler into the interrupted save
    fix = first_fix(report)
    assert fix.title == (
        "Signal handler on_preempt waits for `state_lock`, which the code it interrupted holds: "
        "let the handler only set a flag"
    ), fix.title
    assert "def on_preempt(signum, frame):\n    save_requested.set()" in fix.commands[0], fix.commands
    assert "checkpoint-save" not in [d.cause for d in report.diagnoses[:1]]


def test_a_logging_handler_blocked_on_its_queue_whose_drainer_logs_through_it_is_a_deadlock(knowledge, zoo):  # noqa: F811
    """The tenth hunt's j12: emit puts on a bounded queue under logging's handler lock; the queue's
    drainer logs through the same handler. It was read as output-blocked (87%), the fix a pipe drain."""
    job = zoo("wait_under_lock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end["end"] == "wait-under-lock" and end["lock_module"] == "logging", end
    blocked, drainer = end["threads"]
    assert (blocked["line"], blocked["call"]) == (job.info["put_line"], "outbox.put()"), end
    assert (drainer["tid"], drainer["line"]) == (job.info["drainer"], job.info["log_line"]), end
    fix = first_fix(report)
    assert fix.title.startswith("Never block in a logging handler: outbox.put() at emit"), fix
    assert "outbox.put_nowait(self.format(record))" in fix.commands[0], fix.commands


def test_a_queue_put_under_the_lock_its_reader_takes_is_a_deadlock(knowledge, zoo):  # noqa: F811
    job = zoo("wait_under_lock", args=["state_lock"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert (end["end"], end["lock"], end["object"]) == ("wait-under-lock", "state_lock", "outbox"), end
    assert [t["line"] for t in end["threads"]] == [job.info["put_line"], job.info["log_line"]], end
    fix = first_fix(report)
    assert fix.title == "Do not wait in outbox.put() while holding state_lock", fix
    assert "with state_lock:" in fix.commands[0] and "outbox.put(item, timeout=60)" in fix.commands[0], fix


@pytest.mark.parametrize("variant", ["tcp", "socketpair"])
def test_two_processes_both_sending_on_one_connection_are_told_to_receive_while_sending(knowledge, zoo, variant):  # noqa: F811
    """The tenth hunt's j16: two workers each sendall() 16 MB before reading the other's. Over TCP the
    send was not followed to the process at the connection's other end: no cause, an unrelated fix."""
    job = zoo("socket_both_send", args=[variant])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, job.info["child_pid"], job.proc.pid], report.chain
    assert [hop["waits_on"].get("op") for hop in report.chain[:2]] == ["send", "send"], report.chain
    fix = first_fix(report)
    child = job.info["child_pid"]
    assert fix.title.startswith(f"Process pid {job.proc.pid} and worker process pid {child} both send on one"), fix
    assert "threading.Thread(target=sock.sendall, args=(mine,)" in fix.commands[0], fix.commands


def test_two_processes_both_reading_one_connection_are_a_cycle_about_the_message_end(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j08: the trainer sends a request without the newline its server's readline
    waits for, then waits for the reply. It was "the peer never answers", external-service 92%."""
    job = zoo("socket_both_send", args=["no_newline"])
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child, job.proc.pid], report.chain
    assert [hop["waits_on"].get("op") for hop in report.chain[:2]] == ["recv", "recv"], report.chain
    assert "the other end waits to read from it too" in report.chain[0]["waits_on"]["detail"], report.chain
    fix = first_fix(report)
    assert fix.title == (
        f"Process pid {job.proc.pid} and worker process pid {child} both wait to read on one connection: "
        "the last message is not complete for its reader"
    ), fix.title


def test_a_store_get_for_a_key_set_under_another_spelling_names_both_spellings(knowledge, zoo):  # noqa: F811
    """The tenth hunt's j11: a worker's TCPStore.get("shards_ready") while the coordinator sets
    "shard_ready"; no MASTER_PORT in the environment. It was read as an external service (91%)."""
    job = zoo("store_key_typo")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "rendezvous", top(report)
    end = report.chain[-1]
    assert end["pid"] == job.info["worker_pid"] and end["waits_on"]["end"] == "store-wait", report.chain
    waits = end["waits_on"]
    assert (waits["key"], waits["set_key"]) == ("shards_ready", "shard_ready"), waits
    assert waits["set_at"] == f"store_key_typo.py:{job.info['set_line']}", waits
    fix = first_fix(report)
    assert "waits in the c10d store for 'shards_ready', but the job sets 'shard_ready'" in fix.title, fix
    assert 'STORE_KEY = "shard_ready"' in fix.commands[0], fix.commands


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset pins the job and the load to one CPU")
def test_pool_threads_sharing_their_cpu_with_other_work_are_not_called_hung(knowledge, zoo, session_job):  # noqa: F811
    """The eleventh hunt's h09: two pool threads computing in a `for` loop while another job used the
    CPUs. The process got 46% of a CPU, under the bar for "running", and was called hung, its loop to
    be fixed. Each thread's schedstat counts the time it waited for a CPU as well as the time it ran."""
    for _ in range(2):  # two busy loops on the job's CPU: it gets about a third of it
        session_job(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])
    script = spawn.ZOO_DIR / "busy_helpers.py"
    job = zoo("busy_helpers", argv=["taskset", "-c", "0", sys.executable, str(script), "threads"], wait_ready=True)
    report = diagnose(knowledge, job.proc.pid)
    process = next(p for p in report.processes if p["pid"] == job.proc.pid)
    assert process["cpu_percent"] < 50, process["cpu_percent"]  # what the test is about: a share under the bar
    assert report.verdict.hung is None and report.culprit is None, top(report)
    assert "waits for its thread pool workers while all 2 of them compute" in report.verdict.summary, top(report)


def test_a_check_output_of_a_command_that_follows_for_ever_names_the_flag(knowledge, zoo):  # noqa: F811
    """The eleventh hunt's j24: check_output(["top", "-b", "-d", "1"]) without -n, read as a storage
    stall with "put the data on a local SSD". Here `tail -f`, which coreutils ships everywhere."""
    job = zoo("subprocess_output", args=["endless"])
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert report.chain[-1]["pid"] == child and report.chain[-1]["waits_on"]["end"] == "runs-forever", report.chain
    assert report.culprit["pid"] == child, report.culprit
    fix = first_fix(report)
    assert fix.title.startswith(f"Process pid {child} (tail) runs `tail -f -n 5 "), fix.title
    assert "bound it with no -f" in fix.title, fix.title
    assert f"subprocess_output.py:{job.info['call_line']})" in fix.why, fix.why


def test_a_manager_queue_whose_producer_died_blames_the_dead_producer_not_the_manager(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j01: the trainer waits in a Manager queue's get(); the producer process
    raised and is a zombie. The chain goes through the handler thread that serves the get (not the
    server's idle main thread, "an Event nobody sets") to the dead producer."""
    job = zoo("manager_clients", args=["producer_died"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    producer = job.info["children"][0]
    assert report.culprit is not None and report.culprit["pid"] == producer, report.culprit
    server = next(hop for hop in report.chain if hop["pid"] == job.info["manager_pid"])
    assert "serves a client's call to get()" in server["waits_on"]["detail"], server
    assert "Event nobody sets" not in report.verdict.summary, report.verdict.summary


def test_a_manager_lock_whose_holder_was_killed_blames_no_live_process(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j22: a prep worker was SIGKILLed inside `with lock:` on a Manager lock and
    reaped; the trainer and the other workers wait for the lock. No live process is to blame: every
    live client waits in the manager, and the fix says the holder ended."""
    job = zoo("manager_clients", args=["holder_killed"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert report.culprit is None, report.culprit
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "clients-waiting" and end.get("manager") == "yes", end
    assert report.chain[-1]["pid"] == job.info["manager_pid"], report.chain[-1]
    fix = first_fix(report)
    assert fix.title.startswith("Every live client of the multiprocessing Manager"), fix.title
    assert "lock.acquire(timeout=30)" in fix.commands[-1], fix.commands


def test_a_manager_queue_fed_by_computing_producers_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's h05: two producers compute a minute per item for a Manager queue the trainer
    waits on. Helpers at work: undecided, nobody blamed (it was HUNG, cpu-spin 90%)."""
    job = zoo("manager_clients", args=["producers_compute"])
    report = diagnose(knowledge, job.proc.pid)
    summary = undecided_summary(report)
    assert f"pid {job.proc.pid} (rank) waits for its processes that use its multiprocessing Manager" in summary


def test_a_pool_whose_initializer_raises_in_every_worker_is_hung_not_progressing(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j17: Pool(initializer=...) raising FileNotFoundError in each worker; the pool
    starts new ones for ever and the log grows only with their tracebacks. Not progress: hung, and the
    first fix names the error and where the workers raise it."""
    job = zoo("pool_init_fails")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert "one child process traceback after another (FileNotFoundError" in report.verdict.summary
    fix = first_fix(report)
    assert fix.title.startswith("The pool's workers die as they start (FileNotFoundError"), fix.title
    assert "at load_vocab (" in fix.title and "pool_init_fails.py:" in fix.title, fix.title


def test_a_logger_retrying_a_refused_connection_for_ever_is_hung_on_an_external_service(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j13: a metrics logger retries a tracking server that is down, every 2 s,
    for ever. It was called progressing (the warnings grew the log). Whether or not a retry falls in
    the window, the job is hung, and the refused connection (CPython's "[Errno 111] Connection
    refused") names the service."""
    job = zoo("tracker_refused")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert report.verdict.cause == "external-service", top(report)
    assert any("connection was refused" in e.detail for e in report.diagnoses[0].evidence), report.diagnoses[0].evidence


def test_results_awaited_over_pipes_from_computing_workers_are_not_called_hung(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's h08: the main process polls the pipes of two workers that compute for
    30 s per result. It was HUNG (cpu-spin, a worker the culprit): the workers at the other ends of
    the pipes compute, so one window cannot call the job stuck."""
    job = zoo("results_by_pipe")
    report = diagnose(knowledge, job.proc.pid)
    summary = undecided_summary(report)
    assert f"pid {job.proc.pid} (rank) waits for its pipe writers while all 2 of them compute" in summary, summary


def test_a_trainer_waiting_on_an_rpc_whose_server_child_computes_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's h06 (gRPC there): the main thread waits on a future that a library's I/O
    thread completes, while the server child computes each answer for 30 s. It was HUNG (cpu-spin)."""
    job = zoo("rpc_child_computes")
    report = diagnose(knowledge, job.proc.pid)
    summary = undecided_summary(report)
    assert f"waits for its child process pid {job.info['server_pid']}" in summary and "which computes" in summary, (
        summary
    )


def test_a_lock_order_deadlock_behind_a_heartbeat_that_keeps_logging_is_hung(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's j07: a heartbeat thread logs "alive step=40" every half second while the
    main thread and an EMA thread wait for each other's lock. It was called progressing (the log
    grew); a wait cycle that holds the main thread is stuck for good, whatever other threads log.
    (The heartbeat writes every 0.5 s, so the 1 s window sees the log grow.)"""
    job = zoo("heartbeat_deadlock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert report.chain[-1]["waits_on"].get("end") == "deadlock", report.chain[-1]


def test_two_bounded_multiprocessing_queues_in_a_cycle_are_a_deadlock_not_blocked_output(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's j04: the main process fills a bounded task queue before reading results,
    and the worker blocks putting into the full result queue. Both queues' feeder threads sit in
    pipe_write, which read as output blocked on stdout (90%, "drain the pipe to a file"). A queue's
    feeder writing into its own pipe is no stdout."""
    job = zoo("mp_queue_cycle")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert all(d.cause != "output-blocked" for d in report.diagnoses[:3]), top(report)


def test_a_pool_callback_that_waits_for_its_own_pool_is_named(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's j02: a Pool callback calls pool.apply(), in the result-handler thread
    that alone delivers results. It was read as a lost task (a worker that died mid-task)."""
    job = zoo("pool_callback_apply")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "callback-waits-pool" and "on_done (" in end.get("callback", ""), end
    fix = first_fix(report)
    assert fix.title.startswith("The Pool callback on_done ("), fix.title


def test_a_pool_iterable_that_waits_for_its_own_pool_is_named(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j23: the generator handed to pool.imap calls pool.apply(), in the task-handler
    thread that alone hands tasks out. It was read as a lost task (a worker that died mid-task)."""
    job = zoo("pool_iterable_apply")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "iterable-waits-pool" and "with_sizes (" in end.get("iterable", ""), end
    fix = first_fix(report)
    assert fix.title.startswith("The iterable with_sizes ("), fix.title


def test_a_child_spinning_on_a_flag_its_waiting_parent_raises_later_is_named(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's j08: the trainer waits at a multiprocessing Event the prefetcher child
    sets once started, and the child spins on a flag the trainer raises only after that wait. No
    cause was named and the first fix was "Raise on NaN/Inf gradients"."""
    job = zoo("handshake_spin")
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child], report.chain
    assert report.chain[0]["waits_on"].get("spin_loop") == "while not start.value", report.chain[0]
    fix = first_fix(report)
    assert fix.title.startswith(f"Pid {child} spins in `while not start.value`"), fix.title


def test_a_second_sqlite_connection_waiting_on_the_first_ones_transaction_is_named(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's j01: a summary helper writes through a second connection while the first,
    in the same thread, holds an uncommitted insert; SQLite's busy handler waits for an hour. It was
    read as slow storage, "put the data on a local SSD", the lock unnamed."""
    job = zoo("sqlite_two_connections")
    path = job.info["path"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "own-process" and end.get("object") == path, end
    fix = first_fix(report)
    assert fix.title.startswith(f"Another connection of this same process holds the write lock on {path}"), fix.title


def test_a_main_thread_waiting_for_a_lock_a_pickling_thread_holds_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's h06: the main thread waits for state_lock while a checkpoint thread holds it
    and pickles a large state (protocol 0). It was HUNG, cpu-spin 45%: the chain stopped at the lock.
    It now goes to the thread that holds the lock by its source, which computes in pickle's C code."""
    job = zoo("lock_holder_pickles")
    report = diagnose(knowledge, job.proc.pid)
    summary = undecided_summary(report)
    assert "thread 'ckpt'" in summary and "which computes in dump (_pickle.c)" in summary, summary
    first = report.chain[0]["waits_on"]
    assert first.get("lock") == "state_lock" and report.chain[-1]["thread"]["tid"] == job.info["ckpt_tid"], report.chain


def test_an_exit_that_joins_a_child_waiting_for_its_sentinel_says_to_send_it(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j24: the script ends without putting the metrics writer's None sentinel, and
    multiprocessing joins the non-daemon writer at exit. The fix said no process was left to write."""
    job = zoo("mp_exit_join")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert report.chain[0]["waits_on"].get("exit") == "yes", report.chain[0]
    assert report.chain[1]["pid"] == job.info["child_pid"], report.chain
    fix = first_fix(report)
    assert fix.title.startswith(f"Process pid {job.proc.pid} has finished and exits"), fix.title
    assert "send it its stop sentinel, or make it a daemon" in fix.title, fix.title


def test_a_batch_sampler_waiting_for_the_loss_its_own_loop_puts_is_a_self_wait(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j11: a curriculum batch sampler waits for the previous step's loss, and the
    DataLoader asks it for indices ahead of the loop. It was "waits for an item from a queue"."""
    pytest.importorskip("torch")
    job = zoo("sampler_feedback")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "self-wait" and end.get("waited") == "feedback", end
    assert end.get("put_by", "").startswith("<module> ("), end
    fix = first_fix(report)
    assert "waits for feedback, which only its own code fills" in fix.title, fix.title


def test_a_trainer_reading_the_pty_of_a_computing_child_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The seventeenth hunt's h03: the trainer reads the pty master of an evaluator child that computes
    for half a minute between updates. It was HUNG, cpu-spin: a pty's other end is named by no /proc
    link, so its child, computing, is what the read waits on."""
    pytest.importorskip("torch")
    job = zoo("pty_child_computes")
    report = diagnose(knowledge, job.proc.pid)
    summary = undecided_summary(report)
    assert f"waits for its child process pid {job.info['child_pid']}" in summary and "which computes" in summary, (
        summary
    )
    # not told apart from slow work: no candidate is sure (it was cpu-spin 90%, as the eighteenth hunt's h02/h03)
    assert max(d.confidence for d in report.diagnoses) <= 0.45, [(d.cause, d.confidence) for d in report.diagnoses]
