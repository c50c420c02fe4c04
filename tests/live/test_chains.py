"""Follow the wait to its end: real processes blocked on a FIFO, a pipe, a socket, a lock, a child,
a rank; the verdict names the terminal blocker (path, peer, holder or rank) in one sentence, the
same on every run. Plus the progress judgement: a busy-looping rank is hung, a GC-slowed job is
slow, a long evaluation pass is progressing, mismatched collectives are named as such."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
from zoo.fixtures import sibling_ranks, zoo  # noqa: F401

from conftest import diagnosed as run_diagnosis
from debug_stuck.kb import load_knowledge
from debug_stuck.pipeline import DiagnoseRequest
from debug_stuck.pipeline import diagnose as full_diagnosis
from debug_stuck.render import render
from debug_stuck.zoo import spawn

pytestmark = pytest.mark.timeout(240)

HOP_KEYS = {"pid", "role", "rank", "thread", "where", "waits_on", "evidence"}


def diagnose(knowledge, *pids, **options):
    return run_diagnosis(DiagnoseRequest(pids=list(pids), window=options.pop("window", 1.0), **options), knowledge)


def top(report):
    return [(d.cause, d.confidence) for d in report.diagnoses[:3]], report.verdict.summary


def steady(report) -> tuple:
    """What must not change between two diagnoses of one hang."""
    v = report.verdict
    return v.hung, v.state, v.cause, tuple(hop["pid"] for hop in report.chain), report.chain[-1]["waits_on"]["kind"]


def assert_said_everywhere(report, *words) -> None:
    """The terminal blocker is in the summary, the text and Markdown reports and the JSON chain."""
    text, markdown = (" ".join(render(report, kind).split()) for kind in ("text", "markdown"))
    for word in words:
        assert word in report.verdict.summary, (word, report.verdict.summary)
        assert word in text and word in markdown, word
    for hop in report.to_dict()["chain"]:
        assert HOP_KEYS <= set(hop), hop
        assert {"kind", "object", "detail"} <= set(hop["waits_on"]), hop


PID_IN_COMMAND = re.compile(r"(?:--pid\s+|/proc/|-p\s+)(\d+)")


def assert_first_fix_is_about(report, remedy, *words) -> None:
    """The first fix is the remedy written for the chain's end, naming its object; every check and
    the fix's own commands look at the process at the chain's end, for a cycle the one that closes
    it (or a peer the fix names)."""
    if not report.job:  # the tests' diagnoses skip the advice stage; it runs here, as the CLI runs it
        from debug_stuck.advice import advise

        advise(report, load_knowledge())
    fix = report.diagnoses[0].fixes[0]
    assert fix.origin == "finding" and fix.basis.split(":")[0] == remedy, (fix.title, fix.basis)
    said = f"{fix.title} {fix.why}"
    for word in words:
        assert word in said, (word, said)
    end = report.chain[-1]["pid"]
    if report.chain[-1]["waits_on"]["kind"] == "cycle":  # the hop that closes it: blocked in the kernel
        end = report.chain[-2]["pid"]
    for check in report.diagnoses[0].check_items:
        for pid in PID_IN_COMMAND.findall(check.command):
            assert int(pid) == end, (check.command, end)
    for d in report.diagnoses:
        printed = [" ".join(c.split()) for f in d.fixes for c in f.commands]
        assert len(printed) == len(set(printed)), "a command printed twice"


EXT = "external-service"
# scenario: (the remedy its first fix must be, the words it must hold, formatted with READY)
REMEDIES = {
    "fifo_read": ("fifo-no-writer", ["Nothing will ever write {path}", "open() of {path}"]),
    "fifo_write": ("fifo-no-reader", ["Nothing will ever read {path}"]),
    "connect": ("socket-no-accept", ["127.0.0.1:{port}", "connect()", "SYN_SENT"]),
    "recv": ("socket-no-answer", ["127.0.0.1:{port}", "(pid {peer_pid}, python) never replies"]),
    "recv_unaccepted": ("socket-no-answer", ["127.0.0.1:{port}", "never accepted it"]),
    "http": ("socket-no-answer", ["127.0.0.1:{port}", "urlopen()", "(pid {peer_pid}, python)"]),
    "prompt": ("stdin-prompt", ["'wandb: Enter your choice:'", "at prompt ("]),
    "flock": ("file-lock-held", ["The lock on {path} is held by pid {peer_pid}"]),
}
BLOCKED = [
    # scenario, terminal kind, words the summary must hold (formatted with READY), cause or None
    ("fifo_read", "fifo", ["open() of the FIFO {path}, with no writer", "pid {pid}"], "io-stall"),
    ("fifo_write", "fifo", ["open() of the FIFO {path}, with no reader", "pid {pid}"], "io-stall"),
    (
        "connect",
        "socket",
        ["connect()", "127.0.0.1:{port} (SYN_SENT): nobody accepts the connection"],
        "external-service",
    ),
    ("recv", "socket", ["127.0.0.1:{port} (ESTABLISHED): the peer never answers (pid {peer_pid}"], EXT),
    ("recv_unaccepted", "socket", ["127.0.0.1:{port}", "the other end never accepted it"], EXT),
    (
        "http",
        "socket",
        ["127.0.0.1:{port}", "the peer never answers (pid {peer_pid}", "inside urlopen"],
        "external-service",
    ),
    ("prompt", "tty", ["is blocked in a read of the terminal {tty}"], "input-wait"),
    (
        "flock",
        "sleep",
        ["Process pid {peer_pid}, which holds the lock on {path},", "pid {pid} waits for it"],
        "io-stall",
    ),
]


@pytest.mark.parametrize("scenario, kind, words, cause", BLOCKED, ids=[b[0] for b in BLOCKED])
def test_the_summary_names_what_the_job_waits_on(knowledge, zoo, scenario, kind, words, cause):  # noqa: F811
    job = zoo("blocked_on", args=[scenario])
    first = diagnose(knowledge, job.proc.pid)
    second = diagnose(knowledge, job.proc.pid)
    assert first.verdict.hung is True and first.verdict.state == "hung", top(first)
    assert first.chain[-1]["waits_on"]["kind"] == kind, first.chain
    assert first.chain[0]["pid"] == job.proc.pid
    assert_said_everywhere(first, *[w.format(**job.info) for w in words])
    remedy, named = REMEDIES[scenario]
    assert_first_fix_is_about(first, remedy, *[w.format(**job.info) for w in named])
    assert steady(first) == steady(second)
    # A socket to a party that is not the job's rendezvous master or peers is an external service,
    # never a rendezvous or NCCL network problem.
    assert first.verdict.cause == cause, top(first)


def test_an_asyncio_loop_idle_on_silent_connections_waits_on_that_service(knowledge, zoo):  # noqa: F811
    """No recv on any stack: asyncio's event loop waits in epoll_wait on the connections its tasks
    await. Those connections name the service; the timeout advice is asyncio's (socket timeouts do
    not bound an await)."""
    from debug_stuck.advice import advise

    job = zoo("blocked_on", args=["asyncio_reads"])
    remote = f"127.0.0.1:{job.info['port']}"
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.cause == EXT, top(report)
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "socket" and end["object"] == remote and end.get("event_loop") == "asyncio", end
    assert f"on 3 connections to {remote}" in end["detail"] and f"pid {job.info['peer_pid']}" in end["detail"], end
    fix = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    assert fix.title == f"{remote} never answers; give the call it awaits a timeout", fix.title
    assert "async with asyncio.timeout(60)" in fix.commands[-1] and "setdefaulttimeout" not in fix.commands[-1]


def test_a_breakpoint_left_in_the_code_ends_the_chain_at_the_debugger(knowledge, zoo):  # noqa: F811
    """pdb reads a pipe another process holds open: the prompt is the end (a person answers it),
    not the process at the pipe's other end; the fix is about the breakpoint()."""
    from debug_stuck.advice import advise

    job = zoo("blocked_on", args=["breakpoint_left"], env={"PYTHONBREAKPOINT": ""})
    report = diagnose(knowledge, job.proc.pid)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid], report.chain
    assert report.chain[0]["waits_on"].get("stdin") == "prompt", report.chain
    assert report.verdict.cause == "input-wait", top(report)
    fix = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    stopped_at = rf"Process pid {job.proc.pid} is stopped in the debugger at \S+ \(\S*blocked_on\.py:\d+\)"
    assert re.match(stopped_at, fix.title), fix.title
    assert "export PYTHONBREAKPOINT=0  # breakpoint() does nothing" in "\n".join(fix.commands), fix.commands
    # the playbook's fix for pdb says the same: its commands are not printed a second time
    titles = [f.title for f in report.diagnoses[0].fixes]
    assert report.job["context"]["stopped_in"] == "debugger", report.job
    assert "Continue past the breakpoint() left in the code" not in titles, titles


def test_a_queue_fed_by_a_process_follows_to_that_process_and_no_dataloader_is_named(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["queue_producer"])
    producer = job.info["peer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, producer], report.chain
    first, last = report.chain[0]["waits_on"], report.chain[-1]["waits_on"]
    assert first["detail"] == "waits for an item from its worker processes (a multiprocessing queue or pipe)", first
    assert last["kind"] == "fifo" and last["object"] == job.info["path"], last
    assert report.verdict.cause == "io-stall" and "DataLoader" not in report.verdict.summary, top(report)


LOCK_ORDER = "Take the locks in one fixed order, or use one lock"
LOCK_ORDER_OUT = "for a wait for a lock another thread holds; this job: a wait that ends elsewhere (see the chain)"


def test_a_queue_fed_by_threads_at_a_barrier_sized_for_more_goes_on_to_them(knowledge, zoo):  # noqa: F811
    """The trainer waits in Queue.get; the producers wait at a threading.Barrier made for three sources,
    one disabled: the chain goes from the get to a producer and ends there (no party left to arrive),
    and the fix sizes the barrier from the threads started (not a lock order)."""
    from debug_stuck.advice import advise

    job = zoo("thread_barrier_short")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    first, last = report.chain[0], report.chain[-1]
    assert (
        "which threads 'prefetch-web' and 'prefetch-books' would put once past the threading barrier"
        in (first["waits_on"]["detail"])
        or "which threads 'prefetch-books' and 'prefetch-web' would put" in first["waits_on"]["detail"]
    ), first
    assert last["thread"]["name"].startswith("prefetch-") and last["waits_on"].get("end") == "no-thread", last
    assert "no other thread is left to arrive" in last["waits_on"]["detail"], last
    first = advise(report, load_knowledge()).diagnoses[0]
    fix = first.fixes[0]
    assert fix.title.startswith("No thread is left to reach the barrier"), fix.title
    assert any("threading.Barrier(len(sources))" in c for c in fix.commands), fix.commands
    # no lock order to fix: the playbook's lock_a/lock_b template is left out, and says why
    assert LOCK_ORDER not in [f.title for f in first.fixes], [f.title for f in first.fixes]
    assert {"title": LOCK_ORDER, "why": LOCK_ORDER_OUT} in first.fixes_left_out, first.fixes_left_out


def test_threads_left_at_a_barrier_whose_party_died_are_not_a_lock_order_deadlock(knowledge, zoo):  # noqa: F811
    """Every thread of the process waits on a threading primitive: none is left to release them."""
    from debug_stuck.advice import advise

    job = zoo("blocked_on", args=["barrier_party_died"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.cause == "thread-deadlock", top(report)
    first, last = report.chain[0]["waits_on"], report.chain[-1]["waits_on"]
    assert re.match(r"waits for thread 'shard-[01]' \(and 1 more that waits alike\) to finish", first["detail"]), first
    assert last.get("end") == "no-thread" and "a threading barrier at shard" in last["detail"], last
    fix = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    assert (
        fix.title == "No thread is left to reach the barrier: one died, or the Barrier counts more parties than start"
    )
    assert any("Exception in thread" in c for c in fix.commands), fix.commands


def test_a_hub_download_gets_the_hubs_own_timeouts_and_the_tracker_fix_waits_for_a_tracker(knowledge, zoo):  # noqa: F811
    """huggingface_hub passes its own timeouts to its HTTP client: socket.setdefaulttimeout would not
    bound it. A wandb fix for a job with no wandb in sight is kept, last, on its condition."""
    pytest.importorskip("huggingface_hub")
    from debug_stuck.advice import advise

    job = zoo("blocked_on", args=["hub"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.cause == EXT and report.chain[-1]["waits_on"]["kind"] == "socket", top(report)
    assert_first_fix_is_about(report, "socket-no-answer", f"127.0.0.1:{job.info['port']}", "hf_hub_download()")
    advised = advise(report, load_knowledge()).diagnoses[0]
    first = "\n".join(advised.fixes[0].commands)
    assert "export HF_HUB_DOWNLOAD_TIMEOUT=" in first and "setdefaulttimeout" not in first, first
    conditions = {fix.title: fix.condition for fix in advised.fixes}
    assert conditions["Use local copies of models and datasets on the compute nodes"] is None, conditions
    assert conditions["Run the tracker offline, sync later"] == "if your job uses wandb", conditions
    assert conditions["Keep uploads off the training loop"] == "if your job uses boto3, botocore or s3fs", conditions
    kept_last = [fix.title for fix in advised.fixes[-2:]]
    assert kept_last == ["Run the tracker offline, sync later", "Keep uploads off the training loop"], conditions


def test_a_pipe_whose_writer_is_stopped(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["pipe_reader"])
    writer = job.info["peer_pid"]
    spawn.stop_signal(job, writer)
    report = diagnose(knowledge, job.proc.pid)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, writer]
    assert report.chain[0]["waits_on"]["kind"] == "pipe"
    assert f"the writer is pid {writer}" in report.chain[0]["waits_on"]["detail"]
    assert_said_everywhere(report, f"Process pid {writer}, the writer of that pipe, is stopped (SIGSTOP)")
    assert report.verdict.cause == "io-stall", top(report)
    assert_first_fix_is_about(report, "peer-stopped", f"Resume process pid {writer}: it is stopped")
    assert f"kill -CONT {writer}" in report.diagnoses[0].fixes[0].commands
    assert any("SIGSTOP" in e or "stopped" in e for d in report.diagnoses[:1] for e in map(str, d.evidence))


def test_a_background_job_that_sets_its_terminal_is_stopped_by_job_control_not_sigstop(knowledge, zoo):  # noqa: F811
    """The seventeenth hunt's j07: a run started with `&` calls tty.setcbreak and gets SIGTTOU. It was
    "stopped (SIGSTOP)", with no culprit, and a fix that resumed it into the same stop."""
    job = zoo("tty_background")
    trainer = job.info["pid"]
    report = diagnose(knowledge, trainer)
    assert report.verdict.hung is True, top(report)
    end = report.chain[-1]["waits_on"]
    assert (end.get("end"), end.get("stop_signal"), end.get("tty_call")) == ("job-control", "SIGTTOU", "tty.setcbreak")
    assert "job control" in report.verdict.summary and "SIGSTOP" not in report.verdict.summary, report.verdict.summary
    assert report.culprit is not None and report.culprit["pid"] == trainer, report.culprit
    assert_first_fix_is_about(report, "job-control-stop", "fg in the shell", "tty.setcbreak drew SIGTTOU")
    commands = report.diagnoses[0].fixes[0].commands
    assert f"ps -o pid,pgid,tpgid,stat,tty,args -p {trainer}" in commands, commands
    assert any(c.startswith("setsid nohup ") and "tty_background.py trainer" in c for c in commands), commands


def test_every_stopped_worker_is_resumed_by_the_fix_not_only_the_first(knowledge, zoo):  # noqa: F811
    """The sixth hunt's sigstop_partial_resume: both DataLoader workers stopped, the fix resumed one
    (`kill -CONT 13162`), the other only in a note: an agent relaying it left the job hung."""
    pytest.importorskip("torch")
    job = zoo("dataloader_compute", args=["slow"])
    workers = sorted(job.info["workers"])
    for worker in workers:
        spawn.stop_signal(job, worker)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.culprit["pid"] in workers, top(report)
    first = report.chain[-1]["pid"]
    other = next(w for w in workers if w != first)
    assert_first_fix_is_about(report, "peer-stopped", f"(and pid {other}, stopped too)")
    assert f"kill -CONT {first} {other}" in report.diagnoses[0].fixes[0].commands, report.diagnoses[0].fixes[0]


def test_output_through_a_child_that_stops_reading_is_looked_at_on_the_writer(knowledge, zoo):  # noqa: F811
    """A job teeing its stdout through a child: the checks and the drain read the writer's fd 1 (the
    chain's end is the reader, whose own stdout is another pipe); resuming the reader is offered
    only once it is stopped."""
    from debug_stuck.advice import advise

    job = zoo("blocked_on", args=["tee_child"])
    tee = job.info["peer_pid"]

    def advised():
        report = diagnose(knowledge, job.proc.pid)
        assert report.verdict.cause == "output-blocked", top(report)
        assert [hop["pid"] for hop in report.chain] == [job.proc.pid, tee], report.chain
        return advise(report, load_knowledge()).diagnoses[0]

    running = advised()
    commands = "\n".join(c for fix in running.fixes for c in fix.commands)
    assert f"nohup cat /proc/{job.proc.pid}/fd/1 >>" in commands and f"/proc/{tee}/fd/1" not in commands, commands
    assert f"ls -l /proc/{job.proc.pid}/fd/1 /proc/{job.proc.pid}/fd/2" in running.checks[0], running.checks
    pausing = [
        line
        for line in "\n".join([commands, *running.checks]).split("\n")
        if "py-spy" in line and f"--pid {job.proc.pid}" in line and "--nonblocking" not in line
    ]
    assert not pausing, pausing  # a pause would cut the writer's half-done write short
    left_out = {fix["title"]: fix["why"] for fix in running.fixes_left_out}
    assert left_out.get("Unblock the reader") == "for a stopped reader; this job: a reader that runs", left_out

    spawn.stop_signal(job, tee)
    stopped = advised()
    assert f"kill -CONT {tee}" in stopped.fixes[0].commands, stopped.fixes[0]
    assert "Unblock the reader" not in {fix["title"] for fix in stopped.fixes_left_out}


def test_a_child_fed_rows_on_a_stdin_its_parent_never_closes_gets_the_close_fix(knowledge, zoo):  # noqa: F811
    """The sixth hunt's popen_stdin_not_closed: rows streamed into gzip's stdin, then wait() with the
    pipe open. The fix said stdin=DEVNULL (an empty archive) and that the parent "never writes": close
    the pipe before waiting."""
    job = zoo("blocked_on", args=["stdin_not_closed"])
    child = job.info["peer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child, job.proc.pid], report.chain
    assert_first_fix_is_about(report, "child-stdin", f"waits for its child {child}", "has not closed")
    fix = report.diagnoses[0].fixes[0]
    assert "with proc.stdin:" in fix.commands[0] and "'gzip', '-6'" in fix.commands[0], fix.commands


def test_a_child_waiting_on_the_stdin_its_parent_never_writes(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["child_stdin"])
    child = job.info["peer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child, job.proc.pid]
    assert [hop["waits_on"]["kind"] for hop in report.chain] == ["child", "pipe", "cycle"]
    assert_said_everywhere(
        report,
        f"Deadlock: process pid {job.proc.pid} waits for its child process {child}",
        f"process pid {child} is blocked in a read of a pipe; the writer is pid {job.proc.pid}",
    )
    # the child reads its stdin with readline(), no prompt of input()'s: a pipe protocol that waits both
    # ways (a prompt behind the same cycle is input-wait: test_a_lock_held_by_a_child_that_asks_...)
    assert report.verdict.cause == "thread-deadlock", top(report)
    assert_first_fix_is_about(report, "child-stdin", f"Process pid {job.proc.pid} waits for its child {child}")
    assert "with proc.stdin:" in report.diagnoses[0].fixes[0].commands[0]
    assert "stdin=subprocess.DEVNULL" in report.diagnoses[0].fixes[0].why
    # Seen from the child alone, the read is of its standard input (fd 0): a prompt, not a log pipe.
    alone = diagnose(knowledge, child)
    assert alone.chain[-1]["waits_on"]["fd"] == "0", alone.chain
    assert_first_fix_is_about(alone, "stdin-prompt", "Answer the prompt")
    rerun = alone.diagnoses[0].fixes[0].commands[-1]
    assert rerun.endswith(" < /dev/null") and not rerun.startswith("'"), rerun  # a command to run, not one quoted word


def test_a_child_asking_on_its_inherited_stdin_while_the_job_collects_its_output_is_the_prompt(knowledge, zoo):  # noqa: F811
    """The eighth hunt's subproc_child_prompt: subprocess.run(capture_output=True) polls the child's
    output pipes; the child (a shell script) asks y/N on the stdin it inherited, a pipe nobody writes.
    The chain goes from communicate() to the child's read (not back to the job, which only holds the
    same read end): input-wait, the child to blame; not an I/O stall."""
    job = zoo("blocked_more", args=["child_prompt_pipe"])
    child = job.info["peer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "input-wait", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child], report.chain
    assert report.chain[0]["waits_on"]["detail"].startswith("waits in subprocess's communicate()"), report.chain
    assert report.chain[-1]["waits_on"]["fd"] == "0", report.chain
    assert report.culprit is not None and report.culprit["pid"] == child, report.culprit
    # given only the child (a shell, no Python): the job is read from its Python parent, as for any process
    alone = diagnose(knowledge, child)
    assert [hop["pid"] for hop in alone.chain] == [job.proc.pid, child], alone.chain
    assert any(f"pid {child} (sh) runs no Python" in note for note in alone.notes), alone.notes


def test_a_prompt_on_a_stdin_piped_inside_the_launch_is_not_told_to_redirect_the_launchs_stdin(knowledge, zoo):  # noqa: F811
    """The seventh hunt's rank0_prompt: `sleep | torchrun` inside run.sh. The pipe the prompt reads is
    written by a process the job started, so `LAUNCH < /dev/null` would change nothing: the fix says
    where the pipe is made, and the playbook's nohup-with-/dev/null rerun is left out."""
    job = zoo("blocked_more", args=["prompt_piped"])
    holder = job.info["peer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.chain[-1]["pid"] == job.proc.pid and report.chain[-1]["waits_on"]["fd"] == "0", report.chain
    assert_first_fix_is_about(report, "stdin-prompt", "Answer the prompt 'run_out is not empty, overwrite? [y/N]'")
    fix = report.diagnoses[0].fixes[0]
    assert "The pipe it reads as stdin is made inside `" in fix.why and f"pid {holder} (python" in fix.why, fix.why
    commands = [c for f in report.diagnoses[0].fixes for c in f.commands]
    assert not any("< /dev/null" in c for c in commands), commands
    left = {f["title"]: f["why"] for f in report.diagnoses[0].fixes_left_out}
    assert "stdin piped inside the launch command" in left.get("Give batch jobs no terminal to read", ""), left


def test_a_parent_joining_a_child_before_reading_its_queue_is_a_cycle_with_the_drain_fix(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["queue_join"])
    child = job.info["peer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child, child, job.proc.pid], report.chain
    assert [hop["waits_on"]["kind"] for hop in report.chain] == ["child", "thread", "pipe", "cycle"]
    assert report.chain[1]["waits_on"]["end"] == "queue-flush"
    assert report.chain[2]["thread"]["name"] == "QueueFeederThread"
    # the child is a multiprocessing.Process, no DataLoader's: the evidence names it so
    subjects = [e.detail for d in report.diagnoses for e in d.evidence if e.source == "stack"]
    assert not [t for t in subjects if f"pid {child} (dataloader-worker)" in t], subjects
    assert any(f"pid {child} (worker-process)" in t for t in subjects), subjects
    assert_said_everywhere(
        report,
        f"Deadlock: process pid {job.proc.pid} waits for its child process {child}",
        "waits, at exit, for its multiprocessing queue's feeder thread to flush what it put",
    )
    assert report.verdict.cause == "thread-deadlock", top(report)
    title = f"Process pid {job.proc.pid} joins a child before reading"
    assert_first_fix_is_about(report, "queue-join-before-get", title)
    assert "queue.get()" in report.diagnoses[0].fixes[0].commands[0]


def test_a_spawn_join_leads_to_the_children_and_the_idle_resource_tracker_is_no_evidence(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["spawn_barrier"])
    parties = job.info["party_pids"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.chain[0]["pid"] == job.proc.pid and report.chain[0]["waits_on"]["kind"] == "child", report.chain
    assert report.chain[1]["pid"] in parties, report.chain
    assert "waits at a multiprocessing Barrier at _barrier_party" in report.chain[1]["waits_on"]["detail"]
    tracker = [p["pid"] for p in report.processes if "resource_tracker" in (p.get("cmdline") or "")]
    assert tracker, "multiprocessing's resource tracker runs beside spawned children"
    for diagnosis in report.diagnoses:
        for evidence in diagnosis.evidence:
            assert f"pid {tracker[0]} " not in evidence.detail, (diagnosis.cause, evidence.detail)
    assert report.verdict.cause == "thread-deadlock", top(report)
    assert report.chain[-1]["waits_on"].get("end") == "barrier-short", report.chain


def test_processes_at_a_barrier_sized_for_more_parties_than_were_started_name_the_party_count(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["process_barrier"])
    parties = job.info["party_pids"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]
    assert end["pid"] in parties and end["waits_on"].get("end") == "barrier-short", report.chain
    assert "2 processes arrived, and no other process of the job runs to arrive" in end["waits_on"]["detail"], end
    assert_first_fix_is_about(report, "barrier-parties-short", "A Barrier waits for more parties than reach it")


def test_a_stalled_data_feed_on_stdin_is_not_a_prompt(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["stdin_feed"])
    producer = job.info["peer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    first = report.chain[0]["waits_on"]
    assert first["kind"] == "pipe" and first["fd"] == "0" and "stdin" not in first, report.chain
    assert [hop["pid"] for hop in report.chain][:2] == [job.proc.pid, producer], report.chain
    if not report.job:
        from debug_stuck.advice import advise

        advise(report, load_knowledge())
    fix = report.diagnoses[0].fixes[0]
    assert not (fix.basis or "").startswith("stdin-prompt"), (fix.title, fix.basis)
    assert "/dev/null" not in " ".join(fix.commands), fix.commands


def test_a_stale_lock_file_left_by_a_killed_run_is_named_and_removable(knowledge, zoo):  # noqa: F811
    pytest.importorskip("filelock")
    job = zoo("blocked_on", args=["stale_lock"])
    path = job.info["path"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    end = report.chain[-1]
    assert end["waits_on"]["object"] == path and end["waits_on"].get("lockfile") == "yes", end
    assert_said_everywhere(report, f"waits for the lock file {path} to go away", "no process has it open")
    assert_first_fix_is_about(report, "stale-lock-file", f"Remove the stale lock file {path}")
    fix = report.diagnoses[0].fixes[0]
    removal = next(c for c, s in zip(fix.commands, fix.safety) if s["label"] == "changes")
    assert removal == f"rm -- {path}" and "only when no other process" in fix.safety[-1]["note"]


def test_a_stale_extension_build_lock_is_removed_only_after_the_job_stops(knowledge, zoo):  # noqa: F811
    """The eighth hunt's cppext_stale_lock: removing torch's extension build lock under the waiting job
    made it fail at once (it imports what the killed build left, and never builds). The fix stops the
    job first, then removes the lock: the next run builds."""
    pytest.importorskip("torch")
    job = zoo("blocked_more", args=["stale_build_lock"])
    path = job.info["path"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert report.chain[-1]["waits_on"]["object"] == path, report.chain
    assert_first_fix_is_about(
        report, "stale-build-lock", f"Stop the job, then remove the stale extension build lock {path}"
    )
    fix = report.diagnoses[0].fixes[0]
    labels = [s["label"] for s in fix.safety]
    assert labels.index("stops-job") < labels.index("changes"), (labels, fix.commands)
    assert fix.commands[labels.index("changes")] == f"rm -- {path}"


def test_a_loop_of_the_jobs_own_polling_a_stale_lock_file_is_named_and_removable(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["own_lock_poll"])
    path, dead = job.info["path"], job.info["dead_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "io-stall", top(report)
    end = report.chain[-1]["waits_on"]
    assert end["object"] == path and end.get("lockfile") == "yes", end
    assert_said_everywhere(report, f"waits for the lock file {path} to go away at ")
    assert "wait_for_gpu (assistant/zoo/blocked_on.py:" in report.verdict.summary, report.verdict.summary
    assert f"it names pid {dead}, which no longer runs: a stale lock" in report.verdict.summary, report.verdict.summary
    assert_first_fix_is_about(report, "stale-lock-file", f"Remove the stale lock file {path}")


def test_a_lock_held_by_a_child_that_asks_a_question_on_its_parents_pipe_is_a_prompt(knowledge, zoo):  # noqa: F811
    """The parent waits for a lock its child holds; the child waits for an answer on the stdin pipe the
    parent holds: a cycle, whose way out is the prompt (input-wait), not a lock order."""
    job = zoo("blocked_on", args=["lock_behind_prompt"])
    child = job.info["peer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "input-wait", top(report)
    asker = next(h for h in report.chain if h["pid"] == child)
    assert asker["waits_on"].get("stdin") == "parent" and asker["waits_on"].get("fd") == "0", report.chain
    said = [e.detail for d in report.diagnoses[:1] for e in d.evidence]
    assert any("the others wait behind a prompt" in d for d in said), said
    assert {d.cause for d in report.diagnoses if d.confidence >= 0.5} == {"input-wait"}, top(report)


def test_a_queue_join_whose_consumers_all_idle_is_a_missing_task_done(knowledge, zoo):  # noqa: F811
    """Queue.join (queue.py) is no Thread.join: it waits for task_done() calls, and with every consumer
    back in get(), one was skipped."""
    job = zoo("blocked_on", args=["task_done_missing"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "task-done-missing" and "the thread it joins" not in report.verdict.summary, end
    assert "waits for every item put in a queue to be marked done (task_done)" in end["detail"], end
    assert_first_fix_is_about(report, "queue-task-done-missing", "A task_done() call is missing")


def test_threads_all_waiting_at_one_semaphore_are_leaked_permits_not_a_lock_order(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["semaphore_leak"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "permits-leaked" and "lock-order" not in report.verdict.summary, report.chain
    assert "wait at one Semaphore at load_shard (assistant/zoo/blocked_on.py:" in end["detail"], end
    assert_first_fix_is_about(report, "semaphore-permits-leaked", "A Semaphore's permits leaked")


def test_a_sleeping_loop_of_the_jobs_own_says_what_it_polls_for(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["results_poll"])
    report = diagnose(knowledge, job.proc.pid)
    end = report.chain[-1]
    assert end["waits_on"]["kind"] == "sleep", end
    assert "`while not os.path.exists(results)`" in end["waits_on"]["detail"], end
    assert "wait_for_scores (assistant/zoo/blocked_on.py:" in report.verdict.summary, report.verdict.summary
    waits = next(p["waits"] for p in report.processes if p["pid"] == job.proc.pid)
    assert any(w.get("loop") == "while not os.path.exists(results)" for w in waits.values()), waits


def test_a_launcher_holding_its_sqlite_lock_while_it_joins_the_trainer_that_waits_for_it_is_a_deadlock(
    knowledge,
    zoo,  # noqa: F811
):
    job = zoo("blocked_on", args=["sqlite_held"])
    path, child = job.info["path"], job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["waits_on"]["kind"] for hop in report.chain] == ["child", "lock", "cycle"], report.chain
    assert report.chain[1]["pid"] == child and report.chain[1]["waits_on"]["object"] == path, report.chain
    assert report.verdict.summary.startswith("Deadlock: "), report.verdict.summary
    assert_first_fix_is_about(
        report,
        "lock-held-by-its-waiter",
        f"Deadlock: pid {job.proc.pid} holds the lock on {path} and waits for pid {child}, which waits for that lock",
    )


def test_a_condition_waited_on_after_its_only_notify_names_the_lost_wakeup(knowledge, zoo):  # noqa: F811
    job = zoo("blocked_on", args=["lost_wakeup"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert report.chain[-1]["waits_on"].get("end") == "no-thread", report.chain
    assert_first_fix_is_about(
        report,
        "thread-gone-or-signal-missed",
        "No thread is left to notify the condition: it died, or it signalled before this wait began",
    )
    assert "cond.wait_for(lambda: ready, timeout=600)" in "\n".join(report.diagnoses[0].fixes[0].commands)


def test_a_condition_notified_before_the_wait_names_the_thread_that_could_notify_it(knowledge, zoo):  # noqa: F811
    """The seventh hunt's cond_missed: the notifier is alive (asleep, its source paused), so no thread is
    gone; the fix names it, at its own line, and gives Condition.wait_for with a timeout."""
    job = zoo("blocked_more", args=["notify_missed"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert report.chain[-1]["waits_on"].get("end") != "no-thread", report.chain
    assert_first_fix_is_about(report, "signal-not-sent", "waits for a signal another thread has not sent")
    fix = report.diagnoses[0].fixes[0]
    notifier = r"could notify the condition: 'prefetch', at \S*prefetch \(\S*blocked_more\.py:\d+\)"
    assert re.search(notifier, fix.why), fix.why
    assert "cond.wait_for(lambda: ready, timeout=600)" in "\n".join(fix.commands)


@pytest.mark.parametrize("kind", ["semaphore", "lock"])
def test_a_lock_order_deadlock_the_main_thread_is_part_of_names_both_threads(knowledge, zoo, kind):  # noqa: F811
    """The seventh hunt's rank1_lockinv: the training loop's own thread holds one lock and waits for
    the other, which a reporter thread holds while it waits for the first; nobody joins. Each thread's
    `with` lines, read from the source, make the cycle: both threads and both locks are named."""
    job = zoo("lock_deadlock", args=["main_thread"], env={"ZOO_LOCK_KIND": kind})
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]
    assert end["waits_on"]["kind"] == "lock-cycle", report.chain
    assert "'MainThread' at update_params (" in end["waits_on"]["detail"], end
    assert "'stats-reporter' at update_stats (" in end["waits_on"]["detail"], end
    assert_first_fix_is_about(
        report,
        "lock-order",
        "holds `params_lock` and waits for `stats_lock`",
        "holds `stats_lock` and waits for `params_lock`",
    )


def test_threads_and_futures_lead_to_the_thread_that_blocks(knowledge, zoo):  # noqa: F811
    job = zoo("future_result")
    report = diagnose(knowledge, job.proc.pid)
    assert [hop["waits_on"]["kind"] for hop in report.chain] == ["thread", "futex"]
    assert report.chain[1]["thread"]["name"] == "loader_0"
    assert_said_everywhere(report, "thread 'loader_0', the pool's worker thread, waits for an Event nobody sets")
    assert "at prefetch_shard (" in report.verdict.summary and "its main thread waits for it in result" in (
        report.verdict.summary
    )
    assert_first_fix_is_about(report, "pool-thread-event", "an Event nobody sets", "prefetch_shard (")

    job = zoo("lock_deadlock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.chain[-1]["waits_on"]["kind"] == "lock-cycle"
    assert re.search(r"'worker-[AB]' at update_\w+ \(.*\) and 'worker-[AB]' at update_\w+", report.verdict.summary)
    assert report.verdict.cause == "thread-deadlock", top(report)
    # both sites, the lock each holds and the one it waits for, read from the job's own source
    assert_first_fix_is_about(
        report,
        "lock-order",
        "holds `params_lock` and waits for `stats_lock`",
        "holds `stats_lock` and waits for `params_lock`",
    )
    edit = report.diagnoses[0].fixes[0].commands[0]
    assert re.search(r"with (stats|params)_lock:\n    with (params|stats)_lock:", edit), edit
    # the playbook's template (lock_a, lock_b) is this fix, filled: not said twice, nor left out
    titles = [f.title for f in report.diagnoses[0].fixes]
    assert LOCK_ORDER not in titles and LOCK_ORDER not in [f["title"] for f in report.diagnoses[0].fixes_left_out]
    assert not any("lock_a" in c for f in report.diagnoses[0].fixes for c in f.commands), titles


def test_a_coroutine_that_waits_on_its_own_event_loop_ends_the_chain_at_the_loop_thread(knowledge, zoo):  # noqa: F811
    """The sixth hunt's asyncio_reward_selfwait: the trainer waits in run_coroutine_threadsafe(...).result()
    for score(), which calls a sync helper doing the same on the loop's own thread. The chain went no
    further than the trainer's future (and the lock-order template came first): it goes on to the loop
    thread, which blocks the loop it runs; the fix awaits the coroutine instead."""
    job = zoo("event_loop_self_wait")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    first, last = report.chain[0], report.chain[-1]
    assert (
        first["waits_on"]["detail"] == "waits for a result from the asyncio event loop that thread 'scoring-loop' runs"
    )
    assert last["thread"]["tid"] == job.info["loop_tid"] and last["waits_on"]["end"] == "loop-blocked", last
    assert "at normalize_sync (" in last["waits_on"]["detail"], last
    summary = report.verdict.summary
    assert "thread 'scoring-loop', the thread that runs that event loop, waits for a future's result" in summary
    assert "inside a coroutine or callback of the asyncio event loop it runs itself" in summary, summary
    assert_first_fix_is_about(report, "event-loop-self-wait", "run_coroutine_threadsafe(coro, loop).result() is for")
    titles = [f.title for f in report.diagnoses[0].fixes]
    assert LOCK_ORDER not in titles, titles


def test_workers_waiting_on_their_datasets_own_queue_are_fetching_not_idle(knowledge, zoo):  # noqa: F811
    """The sixth hunt's iterable_persistent: persistent DataLoader workers wait in their dataset's
    `self.work.get()` (a multiprocessing.Queue the main process replaced after they started). The chain
    stopped at the trainer's "poll() on pipe": a worker in a queue's get read as idle for its next
    index. Inside the fetcher's fetch it makes a batch: the chain goes to it, at the dataset's line."""
    pytest.importorskip("torch")
    job = zoo("dataloader_epoch_queue")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "dataloader", top(report)
    assert report.chain[0]["waits_on"]["detail"] == "waits for a batch from its DataLoader workers", report.chain
    last = report.chain[-1]
    assert last["pid"] in job.info["workers"] and "at __iter__ (" in last["waits_on"]["detail"], last
    assert "dataloader_epoch_queue.py:" in last["waits_on"]["detail"], last
    assert report.culprit is not None and report.culprit["pid"] in job.info["workers"], report.culprit
    # the job's source makes its workers persistent: they keep the dataset (and its queue) they started with
    assert_first_fix_is_about(report, "persistent-worker-stale-dataset", "at ShardStream.__iter__ (", "persistent")


def test_two_processes_each_holding_the_file_lock_the_other_wants_get_the_lock_order_fix(knowledge, zoo):  # noqa: F811
    """The sixth hunt's filelock_worker_cycle: two processes take two FileLocks in opposite orders. The
    cycle was found, but its fix was the parent/child one ("pid 9449 holds ... and waits for pid 9449"),
    with SQLite advice and no line of the job's: each side, its lock and its own line, in one order."""
    pytest.importorskip("filelock")
    job = zoo("file_lock_order")
    info = job.info
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert report.chain[-1]["waits_on"]["kind"] == "cycle", report.chain
    assert_first_fix_is_about(report, "file-lock-order", info["clip_lock"], info["index_lock"])
    fix = report.diagnoses[0].fixes[0]
    assert str(info["prefetcher"]) in fix.title and str(info["pruner"]) in fix.title, fix.title
    assert "at read_clip (" in fix.why and "at prune (" in fix.why and "file_lock_order.py:" in fix.why, fix.why
    assert "SQLite" not in fix.why and "lock_a" not in " ".join(
        c for f in report.diagnoses[0].fixes for c in f.commands
    )


def test_a_put_whose_consumer_thread_died_gets_a_put_side_fix(knowledge, zoo):  # noqa: F811
    """The sixth hunt's lightning_writer_died: the loop blocks in Queue.put, its writer thread dead.
    The fix's code was a get-side helper (get_or_fail) for a job that waits to put."""
    pytest.importorskip("torch")
    job = zoo("metrics_writer_died")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert report.chain[-1]["waits_on"].get("end") == "no-thread", report.chain
    assert_first_fix_is_about(report, "thread-gone", "take items from the queue", "room in a full queue")
    code = "\n".join(report.diagnoses[0].fixes[0].commands)
    assert "def put_or_fail(" in code and "get_or_fail" not in code, code
    # the writer's traceback is in the log: the fix sends the user to it, and the log line counts
    assert "grep -n -A25 'Exception in thread'" in code, code
    assert any("thread metrics-writer" in e.detail for e in report.diagnoses[0].evidence), report.diagnoses[0].evidence


def test_a_queue_listener_the_job_stopped_is_named_among_the_reasons(knowledge, zoo):  # noqa: F811
    """The ninth hunt's h04: logging through a blocking QueueHandler whose QueueListener the job
    stopped (to flush before evaluation) and never started again. The fix said the thread had most
    likely died of an exception; the log holds none, and stopping it is named."""
    job = zoo("metrics_writer_died", args=["listener_stopped"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.chain[-1]["waits_on"].get("end") == "no-thread", top(report)
    assert_first_fix_is_about(report, "thread-gone", "room in a full queue", "QueueListener.stop()")
    assert report.diagnoses[0].fixes[0].title.startswith("The thread that should take items from the queue has ended")


def test_a_thread_that_swallowed_its_error_is_not_looked_for_in_the_log(knowledge, zoo):  # noqa: F811
    """The same writer catches its error and logs it at debug level: the log, read whole, holds no
    traceback. The sixth hunt's lightning_writer_died was sent to grep for one."""
    pytest.importorskip("torch")
    job = zoo("metrics_writer_died", args=["swallowed"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.chain[-1]["waits_on"].get("end") == "no-thread", top(report)
    assert_first_fix_is_about(report, "thread-gone", 'holds no "Exception in thread" traceback', "caught and not")
    code = "\n".join(report.diagnoses[0].fixes[0].commands)
    assert "Exception in thread" not in code and "def put_or_fail(" in code, code


def test_a_stopped_multiprocessing_manager_is_the_culprit_of_a_proxy_call_that_never_returns(knowledge, zoo):  # noqa: F811
    """The seventh hunt's mgr_stopped: the trainer's Manager dict proxy call reads the unix socket to
    the manager's server, which is stopped. It was external-service 90% ("timeout on every network
    call", `aws s3 sync`), the chain ending at "a read of a unix socket": /proc gives a unix socket's
    peer nowhere, `ss -x` does."""
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) gives a unix socket's peer")
    job = zoo("peer_stopped", args=["manager"])
    manager = job.info["stopped_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.culprit and report.culprit["pid"] == manager, top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, manager], report.chain
    assert report.verdict.cause == "thread-deadlock", top(report)
    assert_first_fix_is_about(report, "peer-stopped", f"pid {manager}")
    assert f"kill -CONT {manager}" in report.diagnoses[0].fixes[0].commands, report.diagnoses[0].fixes[0]


def test_a_stopped_child_the_trainer_waits_for_is_the_culprit_and_no_cpu_spin(knowledge, zoo):  # noqa: F811
    """The seventh hunt's stopped_child: a preprocessing child run per epoch is stopped; the trainer
    waits in wait4. Culprit and kill -CONT were right, the cause cpu-spin 83% (a BLAS thread's idle
    frame in the stopped child, at 0% CPU)."""
    job = zoo("peer_stopped", args=["child"])
    child = job.info["stopped_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.culprit and report.culprit["pid"] == child, top(report)
    assert report.verdict.cause == "thread-deadlock", top(report)
    assert_first_fix_is_about(report, "peer-stopped", f"pid {child}")
    assert f"kill -CONT {child}" in report.diagnoses[0].fixes[0].commands, report.diagnoses[0].fixes[0]


def test_a_sidecar_server_that_never_answers_is_followed_to_its_blocked_handler(knowledge, zoo):  # noqa: F811
    """The sixth hunt's metrics_server_silent: the trainer waits for an ACK from an aggregator it
    started, whose handler thread waits for a lock it holds itself. The chain ended at "the peer never
    answers" (external-service, an `aws s3 sync` fix); from the server alone it said "waiting for a
    connection that never comes" (its main thread's listening socket). It goes into the server, to the
    handler thread, and ends at the self-held lock; so does a look at the server alone."""
    job = zoo("metrics_sidecar")
    server = job.info["server_pid"]
    for target in (job.proc.pid, server):
        report = diagnose(knowledge, target)
        assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
        end = report.chain[-1]
        assert end["pid"] == server and end["waits_on"]["end"] == "self-held", report.chain
        assert "waits at flush (metrics_agg.py:" in end["waits_on"]["detail"], end
        assert "never comes" not in report.verdict.summary, report.verdict.summary
    assert_first_fix_is_about(report, "self-deadlock", "`self.lock`", "RLock")


def test_torch_save_on_a_fifo_names_the_checkpoint_path(knowledge, zoo):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("torch_save_blocked")
    time.sleep(0.5)  # READY comes just before torch.save blocks
    report = diagnose(knowledge, job.proc.pid)
    path = job.info["checkpoint"]
    assert_said_everywhere(report, f"open() of the FIFO {path}, with no reader, inside save")
    assert report.verdict.cause == "checkpoint-save", top(report)
    assert_first_fix_is_about(report, "fifo-no-reader", f"Nothing will ever read {path}", "save_checkpoint (")


# -- ranks --------------------------------------------------------------------------------------------


def test_a_rank_looping_in_pure_python_is_told_the_same_on_every_run_and_not_blamed(knowledge, zoo):  # noqa: F811
    """Rank 1 turns in a pure-Python loop whose condition never holds while rank 0 waits in all_reduce.
    Its stacks look like a long pure-Python pass (deduplicating shards): no library, no system call.
    One window cannot tell them apart, so: undecided on every run, nobody blamed, the loop named with
    what tells (a loop that polls something, a flag file's stat, stays the culprit:
    test_framework_hangs.py's flag-file rank and tests/live/test_rank_passes.py)."""
    pytest.importorskip("torch")
    job = zoo("gloo_ranks", args=["busy"])
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    reports = [diagnose(knowledge, rank0) for _ in range(3)]
    for report in reports:
        assert report.verdict.hung is None and report.culprit is None, top(report)
        summary = report.verdict.summary
        assert f"pid {rank0} (rank 0) waits in a collective while pid {rank1} (rank 1) turns in its own code at " in (
            summary
        ), summary
        assert "refine_until_converged (" in summary and "making no system call" in summary, summary
        assert f"py-spy dump --locals --pid {rank1}" in summary, summary
        assert report.verdict.cause == "cpu-spin", top(report)  # what it would be, were it stuck
    assert len({steady(r) for r in reports}) == 1


def test_a_rank_computing_inside_the_backward_the_other_waits_at_the_end_of_is_not_called_hung(knowledge, zoo):  # noqa: F811
    """The sixth hunt's healthy_gloo_imbalanced: rank 1 spends seconds in matrix_exp's native backward
    while rank 0 waits in DDP's gradient all-reduce at the end of the same loss.backward(). Their Python
    stacks are the same, so they were one stack group "waiting in a collective": HUNG (cpu-spin 92%) on
    3 runs of 8. A busy rank whose own frames show no wait is a group of its own, the one computing."""
    pytest.importorskip("torch")
    job = zoo("ddp_long_backward", ready_timeout=120)
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    for _ in range(2):
        report = diagnose(knowledge, rank0)
        assert report.verdict.hung is False, top(report)
        summary = report.verdict.summary
        assert f"pid {rank1} (rank 1) keeps computing" in summary and f"pid {rank0} (rank 0) waits for it" in summary
        assert report.culprit is None and report.verdict.cause is None, (report.culprit, summary)
        assert [g["pids"] for g in report.stack_groups] in ([[rank0], [rank1]], [[rank1], [rank0]]), report.stack_groups
        # where rank 0 was caught waiting is a sample of a moving job, not what it is stuck on
        text, markdown = render(report, "text"), render(report, "markdown")
        assert report.chain and "Waits on:" not in text and "What waits on what" not in markdown, text
        assert "Caught waiting (the job moves on: one sample, not a hang):" in text, text
        assert "Should it stop, look first at (candidates, nothing found wrong)" in markdown, markdown


def test_a_rank_waiting_in_the_jobs_store_for_a_key_nobody_set_is_a_store_wait_not_the_network(knowledge, zoo):  # noqa: F811
    """Rank 0's store.wait on a key rank 1 set under another name: the connection to MASTER_ADDR:
    MASTER_PORT is up and its server is a process of the job, which answers once the key exists.
    Not "the peer never answers", not the network: the store, its keys, and a timeout for wait()."""
    pytest.importorskip("torch")
    job = zoo("gloo_ranks", args=["store_key"])
    rank0 = job.info["rank0_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "rendezvous", top(report)
    end = report.chain[-1]
    assert end["pid"] == rank0 and end["waits_on"]["end"] == "store-wait", report.chain
    assert "this job's c10d store (MASTER_ADDR:MASTER_PORT), served by pid " in end["waits_on"]["detail"], end
    assert "network" not in [d.cause for d in report.diagnoses[:3]], top(report)
    # the ranks had stepped (their log says so): a store wait now is no start-up rendezvous
    assert report.answers["phase"]["value"] == "mid-run" and report.verdict.phase != "startup", report.verdict
    assert_first_fix_is_about(report, "store-key-wait", f"pid {rank0}")
    assert f"py-spy dump --locals --pid {rank0}" in report.diagnoses[0].fixes[0].commands


def test_pipeline_ranks_that_all_wait_to_receive_are_an_unpaired_send_not_a_collective(knowledge, zoo):  # noqa: F811
    """Rank 0 of a two-stage gloo pipeline waits in recv for the loss rank 1 sends a step later
    (a step counted after its increment on one side, before on the other); rank 1 went on into
    recv for the next activation. Both wait to receive, from different lines of one function:
    each is named with its own line, and the fix pairs the sends, not the collectives."""
    pytest.importorskip("torch")
    job = zoo("gloo_ranks", args=["p2p_tag"])
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    finding = report.verdict.finding
    assert finding["kind"] == "mismatch" and finding["ops"] == "p2p", finding
    sites = [side["site"] for side in finding["sides"]]
    assert [side["pids"] for side in finding["sides"]] == [[rank0], [rank1]], finding
    assert all("gloo_ranks.py:" in site for site in sites) and sites[0] != sites[1], sites
    summary = report.verdict.summary
    assert re.match(r"Point-to-point deadlock: rank 0 in recv at pipeline \(\S*gloo_ranks\.py:\d+\); rank 1 ", summary)
    assert "every rank waits to receive and none sends" in summary and "no peer pairs (9" in summary, summary
    assert report.culprit is None, report.culprit
    from debug_stuck.advice import advise

    fixes = advise(report, knowledge).diagnoses[0].fixes
    assert fixes[0].title == "Pair every send with a recv on its peer, under the same condition", fixes[0]
    assert re.search(r"rank 1 in recv, called at pipeline \(\S*gloo_ranks\.py:\d+\)", fixes[0].why), fixes[0].why
    assert "Make every rank execute the same collectives" not in [f.title for f in fixes]

    # the same ranks seen from two nodes (each node's snapshot holds one rank): the merge finds it too
    import dataclasses

    from debug_stuck.live.collect import collect
    from debug_stuck.live.nodes import MergedSnapshot, NodeSnapshot
    from debug_stuck.pipeline.judge import judge_nodes

    snap = collect([rank0, rank1], window=1.0)
    nodes = [
        NodeSnapshot(
            name,
            snapshot=dataclasses.replace(
                snap,
                host=name,
                processes=[p for p in snap.processes if p.pid == pid],
                stacks={pid: snap.stacks[pid]},
            ),
        )
        for name, pid in (("node-a", rank0), ("node-b", rank1))
    ]
    merged = judge_nodes(knowledge, MergedSnapshot("ssh", "hosts node-a,node-b", nodes, timeout=30.0))
    finding = merged.verdict.finding or {}
    assert finding.get("ops") == "p2p" and [s["pids"] for s in finding["sides"]] == [[rank0], [rank1]], finding
    assert merged.verdict.summary.startswith("Point-to-point deadlock: rank 0 (node-a) in recv"), merged.verdict.summary


def test_ranks_all_in_point_to_point_calls_are_unpaired_only_when_every_rank_is_seen(knowledge):
    """The rule behind the pipeline test, on stacks: all receiving, or a send whose recv differs
    (gloo's and NCCL's sends wait for the peer's recv); not with ranks of the job unseen (another
    node's rank could be the sender), nor with a rank in a collective."""
    from debug_stuck.live.culprit import find_p2p_deadlock
    from debug_stuck.live.observe import StackGroup

    def rank(pid, rank, call, line):
        frames = [f"{call} (torch/distributed/distributed_c10d.py:2799)", f"step (/job/pp.py:{line})"]
        signature = ((call, "torch/distributed/distributed_c10d.py"), ("step", "/job/pp.py"))
        return StackGroup(signature, call, [pid], [rank], frames, [None])

    both = [rank(10, 0, "recv", 32), rank(11, 1, "recv", 36)]
    alone = {g.pids[0]: g for g in both}.get
    merged = [StackGroup(both[0].signature, "recv", [10, 11], [0, 1], both[0].frames, [None, None])]
    found = find_p2p_deadlock(knowledge, merged, alone, world_size=2)
    assert found is not None and found.ops == "p2p"
    assert found.describe() == "rank 0 in recv at step (/job/pp.py:32); rank 1 in recv at step (/job/pp.py:36)"
    assert found.why().startswith("every rank waits to receive and none sends")
    assert find_p2p_deadlock(knowledge, merged, alone, world_size=4) is None  # ranks 2 and 3 unseen

    pair = [rank(10, 0, "send", 30), rank(11, 1, "recv", 36)]
    found = find_p2p_deadlock(knowledge, pair, {g.pids[0]: g for g in pair}.get, world_size=2)
    assert found is not None and found.why().startswith("a send and a recv wait for each other yet do not meet"), found
    other = [rank(10, 0, "recv", 32), rank(11, 1, "all_reduce", 40)]
    assert find_p2p_deadlock(knowledge, other, {g.pids[0]: g for g in other}.get, world_size=2) is None


def test_ranks_in_one_collective_from_different_lines_are_sides_only_when_every_rank_is_seen(knowledge):
    """The rule behind the process-group test, on stacks: every rank waits in all_reduce, each from a
    line of its own. Not when the lines are the same (one call, a rank missing elsewhere), nor with
    ranks of the job unseen, nor when the ranks are in different collectives (find_mismatch's)."""
    from debug_stuck.advice.pgroups import DEFAULT_GROUP, group_argument
    from debug_stuck.live.culprit import find_site_mismatch
    from debug_stuck.live.observe import StackGroup

    def rank(pid, rank, call, line):
        frames = [f"{call} (torch/distributed/distributed_c10d.py:3252)", f"step (/job/train.py:{line})"]
        signature = ((call, "torch/distributed/distributed_c10d.py"), ("step", "/job/train.py"))
        return StackGroup(signature, call, [pid], [rank], frames, [None])

    def merged(ranks):
        return [
            StackGroup(
                ranks[0].signature,
                "x",
                [g.pids[0] for g in ranks],
                [g.ranks[0] for g in ranks],
                ranks[0].frames,
                [None] * len(ranks),
            )
        ]

    three = [rank(10, 0, "all_reduce", 16), rank(11, 1, "all_reduce", 19), rank(12, 2, "all_reduce", 16)]
    alone = {g.pids[0]: g for g in three}.get
    found = find_site_mismatch(knowledge, merged(three), alone, world_size=3)
    assert found is not None and found.ops == "sites"
    assert [side.pids for _, side in found.sides] == [[10, 12], [11]]
    assert (
        found.describe()
        == "ranks 0,2 in all_reduce at step (/job/train.py:16); rank 1 in all_reduce at step (/job/train.py:19)"
    )
    assert find_site_mismatch(knowledge, merged(three), alone, world_size=4) is None  # rank 3 unseen
    same = [rank(10, 0, "all_reduce", 16), rank(11, 1, "all_reduce", 16)]
    assert find_site_mismatch(knowledge, merged(same), {g.pids[0]: g for g in same}.get, world_size=2) is None

    def call(text):
        import ast

        return ast.parse(text).body[0].value

    assert group_argument(call("dist.all_reduce(g, group=grad_pg)"), "all_reduce") == "grad_pg"
    assert group_argument(call("dist.all_reduce(g, ReduceOp.SUM, pg)"), "all_reduce") == "pg"
    assert group_argument(call("dist.all_reduce(g)"), "all_reduce") == DEFAULT_GROUP
    assert group_argument(call("dist.barrier(None)"), "barrier") == DEFAULT_GROUP
    assert group_argument(call("dist.reduce(g, 0, op, self.pg)"), "reduce") == "self.pg"
    assert group_argument(call("dist.all_reduce(*args)"), "all_reduce") is None
    assert group_argument(call("dist.all_reduce(g, **kw)"), "all_reduce") is None
    assert group_argument(call("hvd.allreduce(g)"), "allreduce") is None


def test_a_send_and_a_recv_whose_tags_differ_are_an_unpaired_p2p_not_a_collective_mismatch(knowledge, zoo):  # noqa: F811
    """The eighth hunt's pp_tag_mismatch: rank 0 sends with tag=step+1, rank 1 receives with tag=step.
    Not "the same collectives in the same order": the pair that does not meet, and the tags."""
    from debug_stuck.advice import advise

    job = zoo("gloo_ranks", args=["send_tag"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    finding = report.verdict.finding
    assert finding["kind"] == "mismatch" and finding.get("ops") == "p2p", finding
    assert "their tags differ" in finding["why"], finding
    first = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    assert first.basis.startswith("p2p-tags-differ"), (first.title, first.basis)
    assert re.search(
        r"rank 0 sends with tag=step \+ 1 \(gloo_ranks\.py:\d+\) and rank 1 receives with tag=step ", first.title
    )


def test_one_collective_on_two_process_groups_in_opposite_orders_names_each_ranks_group(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j17: rank 0 reduces on grad_pg then metrics_pg, rank 1 the other way round.
    Both wait in all_reduce, one stack group: only rank 0 was in the chain, and the fix was "the same
    collectives". Each rank is a side with its own line, and the fix names both groups, from the source."""
    from debug_stuck.advice import advise

    job = zoo("gloo_ranks", args=["group_order"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    finding = report.verdict.finding or {}
    sides = [side["pids"] for side in finding.get("sides") or []]
    assert finding.get("ops") == "sites" and sides == [[job.info["rank0_pid"]], [job.info["rank1_pid"]]], finding
    first = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    assert first.basis.startswith("process-group-order"), (first.title, first.basis)
    assert re.search(
        r"rank 0 calls all_reduce on group=grad_pg \(gloo_ranks\.py:\d+\); "
        r"rank 1 calls all_reduce on group=metrics_pg \(gloo_ranks\.py:\d+\)",
        first.why,
    ), first.why


def test_an_isend_and_an_irecv_waited_on_at_one_line_are_told_apart_by_their_native_frames(knowledge, zoo):  # noqa: F811
    """The eleventh hunt's j12: both ranks wait in `req.wait()` at one line, rank 0's request an isend
    with tag=step, rank 1's an irecv with tag=0. Only native frames tell the send from the recv; each
    rank of a small job is unwound (one per stack left rank 1 without them: "a collective", rank 0
    alone). The fix names both tags, from the source."""
    from debug_stuck.advice import advise

    job = zoo("gloo_ranks", args=["isend_tag"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    finding = report.verdict.finding or {}
    sides = {side["collective"]: side["pids"] for side in finding.get("sides") or []}
    assert finding.get("ops") == "p2p" and sides == {
        "isend": [job.info["rank0_pid"]],
        "irecv": [job.info["rank1_pid"]],
    }, finding
    assert "their tags differ" in finding["why"], finding
    first = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    assert first.basis.startswith("p2p-tags-differ"), (first.title, first.basis)
    assert re.search(r"rank 0 sends with tag=step \(gloo_ranks\.py:\d+\) and rank 1 receives with tag=0 ", first.title)


def test_an_irecv_waited_on_is_named_irecv_in_the_mismatch(knowledge, zoo):  # noqa: F811
    """The ninth hunt's h02: rank 0 waits on dist.irecv(...).wait() while rank 1 goes on into all_reduce.
    The wait has no torch.distributed Python frame (gloo's RecvWork::wait): it was named "a collective"."""
    from debug_stuck.advice import advise

    job = zoo("gloo_ranks", args=["irecv"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    sides = {side["collective"]: side["pids"] for side in report.verdict.finding["sides"]}
    assert sides == {"irecv": [job.info["rank0_pid"]], "all_reduce": [job.info["rank1_pid"]]}, sides
    first = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    assert "rank 0 in irecv, called at train" in first.why, first.why


def test_every_rank_in_the_same_broadcast_with_its_own_src_is_told_to_compare_the_arguments(knowledge, zoo):  # noqa: F811
    """The eighth hunt's bcast_obj_src: broadcast_object_list(src=local_rank) puts every rank in the same
    broadcast, each its own root. No rank is missing: the fix says the arguments differ (the src) and
    compares them on each rank; not "a rank that never joins", not "rank src"."""
    from debug_stuck.advice import advise

    job = zoo("gloo_ranks", args=["broadcast_src"])
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    assert "rank src" not in report.verdict.summary, report.verdict.summary
    first = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    assert first.basis.startswith("same-collective-arguments"), (first.title, first.basis)
    assert first.title.startswith("Every rank is in the same broadcast"), first.title
    assert "Ranks 0, 1, every rank of the job" in first.why and "the same src" in first.why, first.why
    assert f"for p in {rank0} {rank1}; do" in first.commands[0] or f"for p in {rank1} {rank0}; do" in first.commands[0]


def test_a_process_group_made_on_one_rank_alone_is_a_collective_mismatch_not_the_rendezvous(knowledge, zoo):  # noqa: F811
    """The sixth hunt's ddp_newgroup: rank 0 alone calls new_group for its evaluation metrics, which
    every rank must call (torch docs); rank 1 waits in the next all_reduce. It was called the
    rendezvous (92%) with Slurm, Ray and --rdzv_id fixes: new_group is a call every rank makes."""
    pytest.importorskip("torch")
    job = zoo("gloo_ranks", args=["new_group"])
    report = diagnose(knowledge, job.info["rank0_pid"])
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    finding = report.verdict.finding
    assert finding["kind"] == "mismatch", finding
    assert {side["collective"] for side in finding["sides"]} == {"new_group", "all_reduce"}, finding
    assert {p for side in finding["sides"] for p in side["pids"]} == {job.info["rank0_pid"], job.info["rank1_pid"]}
    assert all(d.confidence < 0.1 for d in report.diagnoses if d.cause == "rendezvous"), top(report)
    from debug_stuck.advice import advise

    first = advise(report, knowledge).diagnoses[0].fixes[0]
    # the call itself is under `if rank == 0:`, read from the source: that call is the fix, not the order
    assert re.match(
        r"The new_group at gloo_ranks\.py:(\d+), inside `if rank == 0:` runs on some ranks only", first.title
    ), first.title
    assert re.search(
        r"Rank 0 \(pid \d+\) waits in new_group at gloo_ranks\.py:\d+, inside `if rank == 0:`, while "
        r"rank 1 \(pid \d+\) skipped it",
        first.why,
    ), first.why


def test_the_rank_that_left_the_training_loop_on_its_own_is_the_culprit_of_the_mismatch(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j03: rank 1 stops on its own early-stopping rule and waits in the barrier
    after the loop, rank 0 in the next step's all_reduce inside it. The mismatch was named, the
    culprit not: the rank past the end of the loop the other still runs is the one that left."""
    pytest.importorskip("torch")
    job = zoo("gloo_ranks", args=["early_stop"])
    report = diagnose(knowledge, job.info["rank0_pid"])
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    assert {side["collective"] for side in report.verdict.finding["sides"]} == {"all_reduce", "barrier"}
    assert report.culprit is not None and report.culprit["pid"] == job.info["rank1_pid"], report.culprit
    assert "it has left the loop that starts at line" in report.culprit["reason"], report.culprit


def test_a_step_one_rank_skipped_after_an_error_is_named_with_its_try(knowledge, zoo):  # noqa: F811
    """The sixth hunt's ddp_swallowed_skip: rank 1 caught an error in its step and went on (`except:
    continue`), skipping the step's all_reduce; at the end of the epoch it is in barrier while rank 0
    waits in its last all_reduce. The mismatch was right, its fix generic; it now names the try that
    let one rank skip, and gives the skip decided on all ranks."""
    pytest.importorskip("torch")
    job = zoo("gloo_ranks", args=["skip_bad"])
    report = diagnose(knowledge, job.info["rank0_pid"])
    assert report.verdict.hung is True and report.verdict.cause == "collective", top(report)
    assert {side["collective"] for side in report.verdict.finding["sides"]} == {"all_reduce", "barrier"}
    from debug_stuck.advice import advise

    first = advise(report, knowledge).diagnoses[0].fixes[0]
    assert first.title == "Make every rank call the same collectives in the same order", first.title
    source = (spawn.ZOO_DIR / "gloo_ranks.py").read_text().splitlines()
    reduce_at = 1 + next(i for i, text in enumerate(source, 1) if "torch.full((4,), float(label))" in text)
    try_at = max(i for i, text in enumerate(source[:reduce_at], 1) if text.strip() == "try:")
    except_at = next(i for i, text in enumerate(source, 1) if i > reduce_at and text.strip().startswith("except"))
    said = f"rank 0 is at gloo_ranks.py:{reduce_at}, inside the try at gloo_ranks.py:{try_at}"
    said += f" whose except at line {except_at}"
    assert said in first.why, first.why
    assert any("dist.all_reduce(ok, op=dist.ReduceOp.MIN)" in c for c in first.commands), first.commands


def test_ranks_in_different_collectives_are_a_mismatch(knowledge, zoo):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("gloo_ranks", args=["mismatch"])
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, rank0)
    assert report.culprit is None
    summary = report.verdict.summary
    assert summary.startswith("Collective mismatch: rank 0")
    assert "rank 0" in summary and "all_reduce" in summary and "rank 1" in summary and "broadcast" in summary
    assert "same collective" not in summary
    assert report.verdict.cause == "collective" and report.verdict.hung is True, top(report)
    evidence = " ".join(e.detail for e in report.diagnoses[0].evidence)
    assert "different collectives" in evidence
    # the first fix names both sides and where the job calls each; the playbook's follows
    from debug_stuck.advice import advise

    first = advise(report, knowledge).diagnoses[0].fixes[0]
    assert first.origin == "finding" and first.title == "Make every rank call the same collectives in the same order"
    assert "rank 0 in all_reduce, called at" in first.why and "rank 1 in broadcast, called at" in first.why, first.why
    assert "gloo_ranks.py" in first.why
    assert report.diagnoses[0].fixes[1].title == "Make every rank execute the same collectives"
    assert {p["pid"] for p in report.processes} >= {rank0, rank1}


def test_sibling_ranks_without_a_launcher_are_one_job(knowledge, sibling_ranks):  # noqa: F811
    pytest.importorskip("torch")
    rank0, rank1, _ = sibling_ranks("straggle")
    report = diagnose(knowledge, rank0)
    assert {rank0, rank1} <= {p["pid"] for p in report.processes}
    assert any("started without a common launcher" in n and str(rank1) in n for n in report.notes)
    assert report.culprit is not None and report.culprit["pid"] == rank1, report.stack_groups
    assert report.verdict.summary.startswith(f"Rank 1 (pid {rank1}) sleeps in a loop at sleep_forever")
    assert f"rank 0 (pid {rank0}) waits for it in all_reduce" in report.verdict.summary

    auto = run_diagnosis(DiagnoseRequest(auto=True, window=1.0), knowledge)
    assert {rank0, rank1} <= {p["pid"] for p in auto.processes}, auto.notes
    assert auto.culprit is not None and auto.culprit["pid"] == rank1
    assert any("one job of 2 process trees" in n or "training jobs found" in n for n in auto.notes), auto.notes


# -- progress ----------------------------------------------------------------------------------------


def test_a_job_slowed_by_garbage_collection_is_slow_not_progressing(knowledge, zoo):  # noqa: F811
    job = zoo("rhythm", args=["gc_slowed"], ready_timeout=120)
    report = diagnose(knowledge, job.proc.pid)
    verdict = report.verdict
    assert verdict.state == "slow" and verdict.hung is False, top(report)
    assert verdict.cause == "gc-pause", top(report)
    assert re.search(r"steps come every [\d.]+ s, \d+ times slower than the job's own rhythm", verdict.summary)
    assert "why: garbage collection" in verdict.summary
    assert report.to_dict()["verdict"]["state"] == "slow"


def test_a_long_evaluation_pass_is_progressing(knowledge, zoo):  # noqa: F811
    job = zoo("rhythm", args=["eval_pass"])
    # The log has been silent for 10 minutes, 200 times its step interval: but the rank computes
    # inside evaluate(), an evaluation pass: not hung, not slow.
    assert time.time() - os.stat(job.info["log"]).st_mtime > 500
    for _ in range(2):
        report = diagnose(knowledge, job.proc.pid)
        assert report.verdict.state == "progressing" and report.verdict.hung is False, top(report)
        assert report.verdict.cause is None
        assert "validation pass" in report.verdict.summary


def test_healthy_job_is_progressing_on_every_run(knowledge, zoo):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("healthy")
    for _ in range(3):
        report = diagnose(knowledge, job.proc.pid)
        assert report.verdict.state == "progressing" and report.verdict.hung is False, top(report)
        # nothing to ask about a stop (at what step, after what event) of a job that moves
        assert report.next_questions == [], report.next_questions
    # nor to fix: the agent view an AI relays holds no stop, no check of a cause, no edit
    from debug_stuck.advice import advise
    from debug_stuck.render.agent import agent_view

    view = agent_view(advise(report, knowledge))
    assert view["state"] == "progressing" and not {"fix", "checks", "edits"} & set(view), view
    assert report.edits == [], report.edits


def test_the_cli_json_carries_the_chain_and_the_state(zoo, cli):  # noqa: F811
    job = zoo("blocked_on", args=["fifo_read"])
    code, out, err = cli("diagnose", "--pid", str(job.proc.pid), "--window", "1", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["verdict"]["state"] == "hung" and data["verdict"]["hung"] is True
    assert data["chain"][-1]["waits_on"]["object"] == job.info["path"]
    assert data["chains"][0] == data["chain"]
    waits = next(p for p in data["processes"] if p["pid"] == job.proc.pid)["waits"]
    assert any(w["op"] == "open" for w in waits.values())


def test_a_notebooks_open_is_sited_at_the_cells_call_not_at_ipythons_stand_in():
    # In a Jupyter kernel, `open` is IPython's _modified_open (frames.yaml `stand_in`): the innermost
    # frame of a worker blocked opening a FIFO; the site of the wait is the cell's __getitem__.
    from debug_stuck.live.chain import _where
    from debug_stuck.probes.collectors.stacks import Frame

    dump = Path(__file__).parents[1] / "fixtures" / "stacks" / "ipykernel-dataloader-worker-py-spy.txt"
    frames = []
    for line in dump.read_text().splitlines():
        found = re.match(r"^ {4}(\S+) \((.+):(\d+)\)$", line)
        if found:
            frames.append(Frame(found[1], found[2], int(found[3])))
    where, inside = _where(frames)
    assert where == "__getitem__ (3346239814.py:6)", where
    assert inside[0] == "_modified_open"  # what the thread is inside is unchanged
    assert _where(frames[:1])[0] == "_modified_open (IPython/core/interactiveshell.py:339)"  # nothing below it


def test_a_futex_wait_in_a_c10d_recv_says_what_it_waits_for():
    # rank 0 of a torchrun gloo job in dist.recv from rank 1, which took the other branch into
    # all_reduce (py-spy's frames of that run): the table's entry says what the wait is, not "a lock"
    from debug_stuck.live.chain import _sync_wait
    from debug_stuck.probes.collectors.stacks import Frame

    frames = [
        Frame("recv", "torch/distributed/distributed_c10d.py", 2799),
        Frame("_exception_logger.<locals>.wrapper", "torch/distributed/c10d_logger.py", 83),
        Frame("<module>", "p2p.py", 9),
    ]
    assert _sync_wait(frames) == (
        "a point-to-point transfer with one peer rank",
        "recv (torch/distributed/distributed_c10d.py:2799)",
    )
    # CPython's own primitives keep their words
    frames = [Frame("Event.wait", "threading.py", 629), Frame("prefetch", "data.py", 40)]
    assert _sync_wait(frames) == ("an Event nobody sets", "prefetch (data.py:40)")


@pytest.mark.parametrize("children", ["pool", "dataloader", "dataloader_get"])
def test_children_forked_while_a_thread_held_their_lock_end_at_the_fork(knowledge, zoo, children):  # noqa: F811
    """fork copies a lock held by another thread of the parent, not the thread: in the child nothing
    will release it. The chain ends there, the culprit is the child, the fix starts it with spawn.
    dataloader_get: the worker waits in a `get` of the job's own (a cache's), not a queue's."""
    if children.startswith("dataloader"):
        pytest.importorskip("torch")
    job = zoo("fork_held_lock", args=[children])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert report.chain[0]["pid"] == job.proc.pid, report.chain
    end = report.chain[-1]
    assert end["pid"] in job.info["children"], (end, job.info)
    assert end["waits_on"]["end"] == "fork-held" and end["waits_on"]["forked_by"] == str(job.proc.pid), end
    assert f"held when pid {job.proc.pid}" in end["waits_on"]["detail"] and "fork_held_lock.py" in end["where"]
    assert report.culprit["pid"] in job.info["children"], report.culprit
    assert_first_fix_is_about(report, "fork-held-lock", f"another thread of pid {job.proc.pid} held the lock")
    assert 'multiprocessing.set_start_method("spawn")' in "\n".join(report.diagnoses[0].fixes[0].commands)


def test_a_child_forked_inside_the_with_of_the_lock_it_takes_is_told_to_start_after_the_block(knowledge, zoo):  # noqa: F811
    """The tenth hunt's j14: the main thread starts a fork Process inside `with CACHE_LOCK:`, and the
    child takes CACHE_LOCK. The parent's frame that holds it is on the child's stack below _bootstrap,
    so it read as a thread asking again for its own lock, and the fix was an RLock."""
    job = zoo("fork_held_lock", args=["inside_with"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]
    assert end["pid"] in job.info["children"], (end, job.info)
    assert end["waits_on"]["end"] == "fork-held" and end["waits_on"]["forked_by"] == str(job.proc.pid), end
    assert (
        f"which its parent held at inside_with (assistant/zoo/fork_held_lock.py:{job.info['start_line']})"
        in (end["waits_on"]["detail"])
    ), end
    assert_first_fix_is_about(report, "fork-inside-lock", "Start the process after releasing CACHE_LOCK")
    assert "writer.start()  # outside the lock" in report.diagnoses[0].fixes[0].commands[0]
    assert not any("RLock" in c for fix in report.diagnoses[0].fixes for c in fix.commands), report.diagnoses[0]


def test_a_dataloader_worker_using_a_pool_its_trainer_made_waits_for_threads_the_fork_did_not_copy(knowledge, zoo):  # noqa: F811
    """Pool.map in a forked DataLoader worker, on a Pool made before the fork: its handler threads are
    not in the worker. The chain ends there (not "the thread that would have has ended"); the pool's
    processes, children of the trainer that run no DataLoader worker loop, are worker-processes."""
    pytest.importorskip("torch")
    job = zoo("dataloader_pool")
    worker = job.info["worker_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]
    assert end["pid"] == worker and end["waits_on"]["end"] == "fork-pool", report.chain
    assert end["waits_on"]["detail"].startswith("waits for the results of a multiprocessing Pool call at __getitem__")
    assert report.culprit["pid"] == worker, report.culprit
    roles = {p["pid"]: p["role"] for p in report.to_dict()["processes"]}
    assert roles[worker] == "dataloader-worker", roles
    assert all(roles[pid] == "worker-process" for pid in job.info["pool_pids"]), roles
    assert_first_fix_is_about(report, "fork-lost-pool", f"DataLoader worker pid {worker} waits for a thread pool")


def test_a_child_os_forked_after_openmp_ran_waits_for_the_team_fork_did_not_copy(knowledge, zoo):  # noqa: F811
    """os.fork() (no multiprocessing frame) after the trainer's matmuls started libgomp's team: the
    child's first matmul waits in libgomp, the only thread of its process. Its native frames (read
    although its Python stack is the parent's `<module>` at another line) end the chain there, with
    the spawn fix and GNU OpenMP's own workaround; not a compile fix for a job with no compile."""
    pytest.importorskip("torch")
    job = zoo("fork_openmp")
    if not job.info["libgomp"]:
        pytest.skip("this torch build's OpenMP is not GNU libgomp")
    child = job.info["child"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]
    assert end["pid"] == child and end["waits_on"]["end"] == "fork-pool", report.chain
    assert end["waits_on"]["detail"].startswith("waits for the GNU OpenMP (libgomp) thread team"), end
    assert "extract_features" in end["where"], end
    assert report.culprit["pid"] == child, report.culprit
    assert_first_fix_is_about(report, "fork-lost-pool", f"pid {child} waits for a thread pool")
    assert "torch.set_num_threads(1)" in report.diagnoses[0].fixes[0].why
    assert not any("TORCHINDUCTOR" in c for fix in report.diagnoses[0].fixes for c in fix.commands)


def test_a_write_blocked_on_a_fifo_of_the_jobs_own_is_drained_at_that_descriptor_not_stdout(knowledge, zoo):  # noqa: F811
    """The job's write to a metrics FIFO (fd 3 or so) blocks; its stdout is a file. The drain reads that
    descriptor, and "log to a file instead of a pipe" is left out: the job's output is not the pipe."""
    from debug_stuck.advice import advise

    job = zoo("blocked_on", args=["metrics_fifo"])
    sidecar, fd = job.info["peer_pid"], job.info["fd"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "output-blocked", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, sidecar], report.chain
    assert report.culprit["pid"] == sidecar, report.culprit
    advised = advise(report, load_knowledge()).diagnoses[0]
    commands = "\n".join(c for fix in advised.fixes for c in fix.commands)
    assert fd not in (1, 2) and f"nohup cat /proc/{job.proc.pid}/fd/{fd} >>" in commands, commands
    left_out = {fix["title"]: fix["why"] for fix in advised.fixes_left_out}
    assert left_out.get("Log to a file instead of a pipe", "").startswith("for a write to stdout or stderr"), left_out


def test_a_non_daemon_thread_looping_on_a_stop_event_at_exit_is_the_end_of_the_wait(knowledge, zoo):  # noqa: F811
    """Training ended; Python's exit joins a flusher thread that loops `while not stop.wait(1.0)`: the
    chain ends there (no "pool thread", no lock order), the fix stops the thread or makes it a daemon."""
    job = zoo("exit_flusher")
    # the pipeline as the CLI runs it, with the resume plan
    report = full_diagnosis(DiagnoseRequest(pids=[job.proc.pid], window=1.0, advice=False), knowledge)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]
    assert end["waits_on"]["end"] == "exit-idle-thread", report.chain
    assert "non-daemon thread 'metrics-flusher', which waits at run (" in end["waits_on"]["detail"], end
    assert_first_fix_is_about(report, "exit-idle-thread", "set the Event its loop waits on", "daemon=True")
    assert "pool thread" not in report.verdict.summary, report.verdict.summary
    # its training is done: the resume plan says a rerun would train again, in JSON and in the text
    assert "a rerun would train again" in report.resume["finished"], report.resume
    text = render(report, "text")
    assert f"Not needed: process pid {job.proc.pid} " in text and "to train again anyway:" in text, text


def test_an_atexit_handler_waiting_for_a_dead_writer_is_a_finished_job_not_one_to_rerun(knowledge, zoo):  # noqa: F811
    """The seventh hunt's atexit_join: training is done and saved; an atexit handler waits in
    Queue.join() for a writer thread that died. The resume plan said "lost: steps after 60" and gave
    a rerun; a main thread with no frame of the program below its function runs at exit."""
    job = zoo("exit_flusher", args=["atexit"])
    report = full_diagnosis(DiagnoseRequest(pids=[job.proc.pid], window=1.0, advice=False), knowledge)
    assert report.verdict.hung is True and report.chain[-1]["waits_on"].get("end") == "no-thread", top(report)
    finished = (report.resume or {}).get("finished") or ""
    assert "flush_metrics (" in finished and "called at exit (an atexit handler)" in finished, report.resume
    assert "a rerun would train again" in finished, report.resume


def test_a_program_that_is_not_python_asking_on_the_terminal_ends_the_chain(knowledge, zoo):  # noqa: F811
    """A child with no Python stack (a shell standing in for git's credential prompt) is read at its
    main thread: the chain ends at its terminal read, not at "its system call could not be read";
    it is named by its program."""
    job = zoo("blocked_on", args=["child_prompt"])
    child = job.info["peer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child], report.chain
    end = report.chain[-1]
    assert end["waits_on"]["kind"] == "tty" and end["who"] == f"process pid {child} (sh)", end
    assert f"is blocked in a read of the terminal {job.info['tty']}" in end["waits_on"]["detail"], end
    assert report.verdict.cause == "input-wait" and report.culprit["pid"] == child, top(report)
    assert_first_fix_is_about(report, "stdin-prompt", f"Process pid {child} (sh) waits for someone to type")
    # git's prompt is in the log: git's own fix (never ask on a terminal) applies
    titles = [(f.title, f.condition) for f in report.diagnoses[0].fixes]
    assert ("Make git fail instead of asking for a username", None) in titles, titles


def test_an_event_loop_waiting_on_two_services_ends_at_the_silent_one(knowledge, zoo):  # noqa: F811
    """asyncio.gather waits on a service that streams slowly and one that never answers: the kernel's
    last-receive time of each connection (ss) tells them apart, and the chain ends at the silent one
    (with one of them only, it could not say which: 'waits in epoll_wait() on socket')."""
    import shutil

    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed: the connections' last-receive times cannot be read")
    job = zoo("blocked_on", args=["asyncio_two_services"])
    report = diagnose(knowledge, job.proc.pid)
    end = report.chain[-1]["waits_on"]
    silent, stream = f"127.0.0.1:{job.info['port']}", f"127.0.0.1:{job.info['stream_port']}"
    assert end["kind"] == "socket" and end["object"] == silent and end["end"] == "no-answer", end
    assert f"beside 1 to {stream} that delivers" in end["detail"] and "event loop" in end["detail"], end
    assert report.verdict.cause == "external-service", top(report)
    assert_first_fix_is_about(report, "socket-no-answer", silent)
    assert "async with asyncio.timeout(60)" in report.diagnoses[0].fixes[0].commands[-1]


def test_a_pool_of_downloads_ends_at_the_thread_that_waits_not_an_idle_one(knowledge, zoo):  # noqa: F811
    """ThreadPoolExecutor workers idle in the executor's own loop (_worker's SimpleQueue.get has no
    frame) are not the thread as_completed waits for: the chain reaches the one in urlopen."""
    job = zoo("blocked_on", args=["pool_downloads"])
    report = diagnose(knowledge, job.proc.pid)
    end = report.chain[-1]
    assert end["thread"]["name"].startswith("fetch") and end["waits_on"]["kind"] == "socket", report.chain
    assert end["waits_on"]["object"] == f"127.0.0.1:{job.info['port']}" and end["waits_on"]["end"] == "no-answer"
    assert "inside urlopen" in report.verdict.summary and report.verdict.cause == "external-service", top(report)


def test_a_pool_task_polling_for_a_file_that_never_comes_is_named_not_the_pools_own_pipe(knowledge, zoo):  # noqa: F811
    """The chain ends at the worker sleeping in the task's own loop, and its fix says so; the Pool's
    result-handler thread reading its workers' pipe is how a Pool waits, no evidence of a stalled pipe."""
    from debug_stuck.advice import advise

    job = zoo("blocked_on", args=["pool_polls"])
    report = diagnose(knowledge, job.proc.pid)
    end = report.chain[-1]
    assert end["waits_on"]["kind"] == "sleep" and "_wait_for_marker" in end["waits_on"]["detail"], report.chain
    advise(report, load_knowledge())
    fix = report.diagnoses[0].fixes[0]
    assert fix.basis.startswith("sleep-own-loop:") and "_wait_for_marker" in fix.title, (fix.title, fix.basis)
    said = [e.detail for d in report.diagnoses for e in d.evidence]
    assert not any("waits on a FIFO or pipe" in d for d in said), said


@pytest.mark.parametrize(
    "scenario, remedy, title",
    [
        ([], "debugger-prompt", "Process pid {trainer} is stopped in the debugger at"),
        (["input"], "child-prompt", "Child {trainer} asks a question on its stdin"),
    ],
)
def test_a_launched_child_waiting_on_the_stdin_pipe_its_launcher_holds_is_not_told_to_close_it(
    knowledge,
    zoo,  # noqa: F811
    scenario,
    remedy,
    title,
):
    """The eleventh hunt's j01: pdb in a child whose stdin pipe its launcher holds and never writes;
    the thirteenth hunt's j01: the child asks "Overwrite? [y/N]" with input(). The first fix closed the
    pipe (pdb quits, input() raises EOFError: the training stops with it); the question is what to act
    on, named at the trainer, not at the launcher."""
    job = zoo("breakpoint_launched", args=scenario, env={"PYTHONBREAKPOINT": ""})
    trainer = job.info["trainer_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, trainer, job.proc.pid], report.chain
    assert report.verdict.cause == "input-wait", top(report)
    assert_first_fix_is_about(report, remedy, title.format(trainer=trainer))
    titles = [fix.title for fix in report.diagnoses[0].fixes]
    assert not any("close it first" in title for title in titles), titles


def test_a_sqlite_insert_waiting_for_a_child_that_idles_in_its_transaction_is_hung_on_that_child(knowledge, zoo):  # noqa: F811
    """The eleventh hunt's j09: the trainer sleeps inside sqlite3's busy handler at a line of its own
    `for` loop, waiting for the lock an idle child holds. The sleep is SQLite's, not the loop's: it was
    read as a work loop between inputs (undecided), the first fix "put the data on a local SSD"."""
    job = zoo("sqlite_idle_holder")
    holder, path = job.info["holder_pid"], job.info["path"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert report.chain[0]["waits_on"]["kind"] == "lock" and report.chain[0]["waits_on"]["object"] == path
    assert report.culprit["pid"] == holder, report.culprit
    assert_first_fix_is_about(report, "file-lock-held", f"The lock on {path} is held by pid {holder}")


def test_a_process_holding_a_lock_while_it_waits_for_a_child_that_needs_it_is_a_cycle_through_the_lock(
    knowledge,
    zoo,  # noqa: F811
):
    """The eleventh hunt's j26: the trainer waits for a reward server's reply inside `with stats_lock:`,
    and the server takes stats_lock before replying. The chain stopped at the server ("waits for a lock
    or condition"), and the fix was a two-lock ordering."""
    job = zoo("process_lock_reply")
    server = job.info["server_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, server, job.proc.pid], report.chain
    hop = report.chain[1]["waits_on"]
    assert hop["lock"] == "stats_lock" and hop["object"] == str(job.proc.pid), hop
    assert f"encloses main (assistant/zoo/process_lock_reply.py:{job.info['wait_line']})" in hop["detail"], hop
    assert_first_fix_is_about(
        report, "process-lock-held-across-wait", f"Process pid {job.proc.pid} holds stats_lock while it waits"
    )


def test_a_dataloader_iterated_inside_the_multiprocessing_lock_its_workers_take_is_a_cycle(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j14: `for x, y in loader:` inside `with ds.cache_lock:`, the workers'
    __getitem__ in `with self.cache_lock:`. It was "held when pid N forked it" with a spawn fix: a
    multiprocessing lock is shared, its holder the main process."""
    pytest.importorskip("torch")
    job = zoo("dataloader_lock_held")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert report.chain[0]["pid"] == job.proc.pid and report.chain[-1]["pid"] == job.proc.pid, report.chain
    hop = report.chain[1]["waits_on"]
    assert hop["lock"] == "ds.cache_lock" and hop.get("end") != "fork-held", hop
    assert "waits for the multiprocessing lock self.cache_lock at __getitem__" in hop["detail"], hop
    assert_first_fix_is_about(
        report,
        "process-lock-held-across-wait",
        f"Process pid {job.proc.pid} holds ds.cache_lock while it waits for DataLoader worker pid",
    )


def test_an_iterable_worker_that_ran_out_of_shards_is_not_blamed_its_sibling_waiting_at_a_barrier_is(knowledge, zoo):  # noqa: F811
    """The seventeenth hunt's j05: IterableDataset workers meet at a multiprocessing Barrier after each
    shard; worker 1 ran out of shards and exited (code 0). It was "worker pid N has exited", the
    worker waiting at the barrier listed as present."""
    pytest.importorskip("torch")
    job = zoo("iterable_shard_barrier")
    waiting, exited = job.info["waiting_worker"], job.info["exited_worker"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert [hop["pid"] for hop in report.chain][:2] == [job.proc.pid, waiting], report.chain
    assert report.culprit is not None and report.culprit["pid"] == waiting, report.culprit
    assert str(exited) not in report.verdict.summary, report.verdict.summary


def test_a_child_blocked_writing_to_a_pty_its_parent_reads_only_after_waiting_is_a_cycle(knowledge, zoo):  # noqa: F811
    """The seventeenth hunt's j01: Popen on a pty's slave, wait() before reading the master. The chain
    stopped at "a write of the terminal /dev/pts/N", the fix read the slave (cat /proc/PID/fd/1)."""
    job = zoo("pty_output_wait")
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child, job.proc.pid], report.chain
    assert report.chain[1]["waits_on"]["kind"] == "tty" and report.chain[-1]["waits_on"]["kind"] == "cycle"
    assert_first_fix_is_about(report, "child-pty-output", f"waits for its child {child} before reading the pseudo")
    assert not any(f"/proc/{child}/fd/1" in c for c in report.diagnoses[0].fixes[0].commands)


def test_a_server_child_blocked_publishing_to_a_subscriber_that_sleeps_is_followed_to_it(knowledge, zoo):  # noqa: F811
    """The seventeenth hunt's j06: the reward server's one thread is in sendall to its dashboard,
    which reads once an hour. It was "the peer never answers (sleeping)", external-service."""
    job = zoo("server_publish_blocked")
    server, dashboard = job.info["server_pid"], job.info["dashboard_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, server, dashboard], report.chain
    assert f"its server, pid {server} of this job, is blocked sending" in report.chain[0]["waits_on"]["detail"]
    assert report.culprit is not None and report.culprit["pid"] == dashboard, report.culprit
    assert "never answers" not in report.verdict.summary, report.verdict.summary


def test_an_eventfd_no_thread_is_left_to_write_says_its_writer_died(knowledge, zoo):  # noqa: F811
    """The seventeenth hunt's j12: the main thread in os.eventfd_read, its prefetcher thread dead of an
    error the log shows. It was "blocked in a read of the file eventfd", with a generic timeout fix."""
    job = zoo("eventfd_producer_died")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "no-thread" and "waits for a write to its eventfd" in end["detail"], end
    assert_first_fix_is_about(report, "thread-gone", "The thread that should write to the eventfd has died")


def test_an_event_set_below_the_line_where_its_setter_waits_for_the_waiters_is_a_cycle(knowledge, zoo):  # noqa: F811
    """The eleventh hunt's j21: wait(futures) on tasks that wait for weights_synced, set on the next
    line. It said "an Event nobody sets"; the setter is the main thread, after its own wait."""
    job = zoo("event_set_after_wait")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["waits_on"]["kind"] for hop in report.chain] == ["thread", "thread", "cycle"], report.chain
    hop = report.chain[1]["waits_on"]
    assert (hop["setter"], hop["event"]) == ("MainThread", "weights_synced"), hop
    assert hop["set_at"] == f"main (assistant/zoo/event_set_after_wait.py:{job.info['set_line']})", hop
    assert_first_fix_is_about(report, "set-after-wait", "Thread 'MainThread' sets weights_synced at main")


def test_a_multiprocessing_event_set_below_the_join_of_its_waiter_is_a_cycle(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j05: the trainer joins its evaluator process, which waits for ckpt_ready, set
    on the line after the join. No cause was named; the parent is the setter, after its own wait."""
    job = zoo("event_set_after_wait", args=["process"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain[:2]] == [job.proc.pid, job.info["child_pid"]], report.chain
    hop = report.chain[1]["waits_on"]
    assert (hop["setter_pid"], hop["event"]) == (str(job.proc.pid), "ckpt_ready"), hop
    assert hop["set_at"] == f"main_process (assistant/zoo/event_set_after_wait.py:{job.info['set_line']})", hop
    assert_first_fix_is_about(report, "set-after-join", f"Pid {job.proc.pid} sets ckpt_ready at main_process")


def test_a_loop_polling_for_a_marker_whose_child_crashed_ends_at_the_dead_child(knowledge, zoo):  # noqa: F811
    """The eleventh hunt's j20: `while not os.path.exists(done)` while the shard builder that would
    write it is a zombie with exit code 1 (its IndexError in the log): no cause was named."""
    job = zoo("poll_dead_child")
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child], report.chain
    assert "has exited with an error" in report.chain[0]["waits_on"]["detail"], report.chain
    assert report.culprit["pid"] == child, report.culprit
    assert_first_fix_is_about(report, "dead-process", f"Worker process pid {child} has died (exit code 1)")


def test_a_loop_polling_a_shared_counter_whose_child_crashed_ends_at_the_dead_child(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's j20: `while seq.value == seen: time.sleep(0.001)` on a counter the decoder
    child bumps, and the decoder died of a ValueError. Only `while not ...` loops read as polls: no
    cause was named."""
    job = zoo("poll_dead_child", args=["counter"])
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child], report.chain
    assert report.culprit["pid"] == child, report.culprit
    assert_first_fix_is_about(report, "dead-process", f"Worker process pid {child} has died (exit code 1)")


def test_an_accept_whose_client_child_crashed_ends_at_the_dead_child(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j24: Listener.accept() while the actor child that would connect is a zombie
    (FileNotFoundError before it connects). No cause was named and the socket read "to 0.0.0.0:0"."""
    job = zoo("poll_dead_child", args=["accept"])
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child], report.chain
    detail = report.chain[0]["waits_on"]["detail"]
    assert "a TCP socket listening at 127.0.0.1:" in detail and "0.0.0.0:0" not in detail, detail
    assert f"pid {child}, its child that was to make it, has exited" in report.verdict.summary, report.verdict.summary
    assert report.culprit["pid"] == child, report.culprit
    assert_first_fix_is_about(report, "dead-process", f"Worker process pid {child} has died (exit code 1)")


def test_a_sigwait_whose_sender_child_crashed_ends_at_the_dead_child(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j23: signal.sigwait(SIGUSR1) while the helper child that would send it is
    a zombie (KeyError before it signals). No cause was named ("waits (rt_sigtimedwait)"), and the
    first fix was the compile playbook's."""
    job = zoo("poll_dead_child", args=["sigwait"])
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child], report.chain
    first = report.chain[0]["waits_on"]
    assert first["kind"] == "signal" and first["detail"].startswith("waits for a signal (rt_sigtimedwait)"), first
    assert f"pid {child}, its child that was to send it, has exited" in report.verdict.summary, report.verdict.summary
    assert report.culprit["pid"] == child, report.culprit
    assert_first_fix_is_about(report, "dead-process", f"Worker process pid {child} has died (exit code 1)")


def test_a_queue_made_at_import_in_a_spawn_job_is_one_nobody_puts_into(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j11: spawn children put into their own copy of a module-level Queue; the
    main process reads a pipe whose write end only it holds. No cause was named, the compile fix first."""
    job = zoo("queue_at_import")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "pipe" and end.get("end") == "no-thread" and end.get("peer") == "self", report.chain
    assert "only this process holds its write end" in end["detail"], end
    assert_first_fix_is_about(
        report,
        "queue-made-at-import",
        "The queue results is made at import (queue_at_import.py:27): each spawned child puts into its own",
    )


def test_a_launcher_reaping_every_child_waits_for_the_server_child_that_never_exits(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j16: `while True: os.wait()` with a `python -m http.server` dashboard among
    the children. The dashboard was blamed, external-service, "a connection that never comes"."""
    job = zoo("launcher_waits_all")
    dashboard = job.info["dashboard"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, dashboard], report.chain
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "serves-forever" and "serve_forever" in end["detail"], end
    assert_first_fix_is_about(
        report,
        "child-serves-forever",
        f"Process pid {job.proc.pid} waits for process pid {dashboard} to end, and it serves until it is stopped",
    )


def test_a_getter_and_a_putter_of_one_process_wait_on_two_queues(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j24: the prefetcher fills the queue it bound once, the trainer reads the one
    that replaced it. Only the trainer's get was named, with a generic timeout fix."""
    job = zoo("queue_replaced")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "other-queue" and end["threads"][0]["name"] == "prefetch", end
    assert re.match(r"_run \(\S*queue_replaced\.py:\d+\)", end["threads"][0]["where"]), end
    assert_first_fix_is_about(
        report,
        "queue-filled-elsewhere",
        f"Thread 'prefetch' fills another queue than the one process pid {job.proc.pid}",
    )


@pytest.mark.parametrize(
    "scenario, end, thread, remedy, title",
    [
        ("server_shutdown", "self-shutdown", "control-server", "server-shutdown-from-handler",
         "Process pid {pid}, thread 'control-server' calls the server's shutdown() from its own serve_forever thread"),
        ("import_join", "import-join", "plugin-warmup", "thread-joined-at-import",
         "A thread started and joined while a module is imported waits for that import"),
    ],
)  # fmt: skip
def test_a_thread_waiting_on_itself_through_a_library_is_named_with_the_docs_rule(
    knowledge,
    zoo,  # noqa: F811
    scenario,
    end,
    thread,
    remedy,
    title,
):
    """The thirteenth hunt's j19 (socketserver's shutdown() from its own handler) and j13 (a thread
    started and joined at import imports that module): both "find what should set it"."""
    job = zoo("library_self_waits", args=[scenario])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    last = report.chain[-1]
    assert last["thread"]["name"] == thread and last["waits_on"].get("end") == end, report.chain
    assert_first_fix_is_about(report, remedy, title.format(pid=job.proc.pid))


def test_a_future_whose_loop_thread_was_never_started_names_the_thread(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j20: run_coroutine_threadsafe on a loop whose thread is made and never
    started. The chain said "(or was never started)", the fix that the thread had died."""
    job = zoo("thread_never_started")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert report.chain[-1]["waits_on"].get("end") == "no-thread", report.chain
    assert_first_fix_is_about(
        report,
        "thread-never-started",
        "Thread uploader is made at thread_never_started.py:22 and never started: call uploader.start()",
    )


def test_asyncio_locks_taken_in_opposite_orders_are_named_at_the_idle_loop(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j03: two coroutines nest `async with` on two asyncio.Locks in opposite
    orders. It said "no task is left to wake the loop", with neither the tasks nor the locks named."""
    job = zoo("asyncio_lock_order")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "no-task" and end.get("async_locks") == "params_lock and stats_lock", end
    assert_first_fix_is_about(
        report, "asyncio-lock-order", "Coroutines take asyncio locks params_lock and stats_lock in opposite orders"
    )


def test_an_asyncio_barrier_with_more_parties_than_tasks_is_named_at_the_idle_loop(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j21: two tasks wait in asyncio.Barrier(EXPECTED_SHARDS), which is 3. It said
    "no task is left to wake the loop", with the barrier unnamed; the count of tasks is not guessed."""
    job = zoo("asyncio_barrier_short")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "no-task" and end.get("barrier_parties") == "asyncio.Barrier(EXPECTED_SHARDS)", end
    assert re.fullmatch(r"load_shard \((\S+/)?asyncio_barrier_short\.py:29\)", end.get("barrier_waits") or ""), end
    assert re.fullmatch(r"(\S+/)?asyncio_barrier_short\.py:33", end.get("barrier_at") or ""), end
    assert_first_fix_is_about(
        report, "asyncio-barrier-short", "The tasks wait in asyncio.Barrier(EXPECTED_SHARDS) (made at"
    )


def test_an_asyncio_event_set_from_another_thread_is_named_at_the_idle_loop(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j08: a loader thread calls ready.set() on the asyncio.Event a coroutine
    awaits. It read "no task is left ... one died", with the TaskGroup fix; the set() never wakes the loop."""
    job = zoo("asyncio_set_from_thread")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "no-task" and end.get("awaited") == "ready.wait()", end
    assert re.match(r"loader \((\S+/)?asyncio_set_from_thread\.py:\d+\), which the file runs", end["set_in_thread"]), (
        end
    )
    assert_first_fix_is_about(report, "asyncio-set-from-thread", "The loop awaits ready.wait() in main (")


def test_a_threading_lock_held_across_an_await_is_named_at_the_blocked_loop(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j15: a coroutine holds a threading.Lock across an await, another coroutine's
    `with` on it blocks the loop's thread. The fix was "take the locks in one fixed order" (one lock)."""
    job = zoo("asyncio_thread_lock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "loop-blocked" and end.get("lock") == "state_lock", end
    assert end["held_across_await"].startswith("checkpointer (its `with` at "), end
    assert_first_fix_is_about(report, "threading-lock-across-await", "Coroutine checkpointer (its `with` at")


def test_asyncio_runs_exit_waiting_for_its_default_executor_goes_on_to_the_blocked_worker(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j21: asyncio.run ends with shutdown_default_executor, whose thread joins a
    run_in_executor worker blocked in queue.get. The chain stopped at the loop's epoll."""
    job = zoo("asyncio_executor_exit")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert "shut down" in report.chain[0]["waits_on"]["detail"], report.chain[0]
    end = report.chain[-1]
    assert end["where"].startswith("wait (") and "pump (" in end["waits_on"]["detail"], report.chain
    assert end["waits_on"].get("end") == "sentinel-missing" and end["waits_on"].get("sentinel") == "None", end
    assert_first_fix_is_about(report, "queue-sentinel-missing", "stops on None from telemetry_q, and nothing puts it")


def test_a_marker_made_below_the_wait_for_its_poller_is_named_where_it_is_made(knowledge, zoo):  # noqa: F811
    """The thirteenth hunt's j06 and j09: the file a process polls for is created by the process that
    waits for it, below that wait. The fixes said the loop waited "for something that never happens"."""
    job = zoo("marker_after_wait")
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child], report.chain
    assert_first_fix_is_about(
        report,
        "file-made-after-wait",
        f"Process pid {job.proc.pid} creates MARKER at marker_after_wait.py:38, after it waits at "
        f"marker_after_wait.py:37 for worker process pid {child}, which polls for it",
    )


@pytest.mark.parametrize("uploads", ["threads", "pool"])
def test_a_semaphore_whose_takers_all_ended_without_release_is_a_permit_leak(knowledge, zoo, uploads):  # noqa: F811
    """The eleventh hunt's j22: upload threads release their slot only on success; after two failures
    the loop waits in acquire() with no thread left. It read "a lock whose thread has ended", with a
    queue snippet as the fix. The fourteenth hunt's j17: the same on a ThreadPoolExecutor, whose idle
    workers hid the leak ("put a timeout on every wait")."""
    job = zoo("upload_slots", args=["pool"] if uploads == "pool" else [])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end["end"] == "permits-leaked", end
    assert end["detail"].startswith(
        f"waits for a permit of a Semaphore at main (assistant/zoo/upload_slots.py:{job.info['acquire_line']})"
    ), end
    assert_first_fix_is_about(report, "semaphore-permits-leaked", "A Semaphore's permits leaked")


def test_a_notify_lost_before_a_bare_wait_is_told_to_wait_on_the_state_at_the_bare_wait(knowledge, zoo):  # noqa: F811
    """The eleventh hunt's j03: the trainer notifies before its uploader thread starts, the uploader
    calls cv.wait() with no predicate, the trainer waits on the state. The trainer's right wait was
    blamed, and the first fix was a pool thread's Event timeout."""
    job = zoo("lost_notify_uploader")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]
    assert end["thread"]["tid"] == job.info["uploader"], report.chain
    assert (
        end["where"].startswith("wait")
        and f"lost_notify_uploader.py:{job.info['bare_wait_line']})" in (end["waits_on"]["detail"])
    ), end
    assert_first_fix_is_about(report, "signal-not-sent", "thread 'ckpt-uploader' waits for a signal")


def test_a_udp_receive_nothing_sends_to_names_the_bound_port(knowledge, zoo):  # noqa: F811
    """The eleventh hunt's j18: recvfrom on a UDP socket nothing sends to. The socket was not named
    ("a receive on a socket"), and the fix was a requests timeout."""
    job = zoo("udp_controller")
    address = f"127.0.0.1:{job.info['port']}"
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "external-service", top(report)
    end = report.chain[-1]["waits_on"]
    assert (end["kind"], end["object"], end["end"]) == ("socket", address, "no-datagram"), end
    assert f"a UDP socket bound to {address}" in end["detail"], end
    assert_first_fix_is_about(report, "udp-no-datagram", f"Nothing has sent a datagram to {address}")


def test_a_file_lock_held_by_the_waiting_threads_own_process_is_a_deadlock_not_a_stale_file(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j25: the main thread holds a FileLock while pool threads that take the same
    lock file poll for it. /proc/locks names the job's own pid: never "no process has it open", never
    an rm of the file; the holding thread is named, from its `with`."""
    pytest.importorskip("filelock")
    from debug_stuck.advice import advise

    job = zoo("filelock_own_thread")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    lock = next(hop["waits_on"] for hop in report.chain if hop["waits_on"].get("end") == "own-process")
    assert lock["holder_thread"] == "MainThread" and "filelock_own_thread.py:" in lock["holder_at"], lock
    assert "no process has it open" not in report.verdict.summary, report.verdict.summary
    fixes = [fix for d in advise(report, knowledge).diagnoses for fix in d.fixes]
    assert fixes[0].title.startswith("Thread 'MainThread' holds the lock on "), fixes[0].title
    assert not any(command.startswith("rm ") for fix in fixes for command in fix.commands), fixes


def test_one_sleep_of_a_day_is_named_with_its_time_left_not_called_a_loop(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j19: an upload thread in time.sleep(86400) (a server's Retry-After), the
    trainer waiting for its future. It read "sleeps in a loop ... a condition that never becomes true"."""
    job = zoo("retry_after")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "sleep" and end["sleep_left"].endswith("(about 24.0 h)"), end
    assert "in a loop" not in end["detail"] and f"retry_after.py:{job.info['sleep_line']})" in end["detail"], end
    assert_first_fix_is_about(report, "long-sleep", "thread 'uploader_0' sleeps at upload (")


def test_a_retry_sleep_in_milliseconds_passed_as_seconds_is_one_long_sleep(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j19: `time.sleep(RETRY_MS)` (30000 s) inside `for attempt in range(5)`. It was
    "not judged hung ... a work loop waiting for its next input", though 29984 s were left, and the
    first fix was "Compile in-process". A sleep of 10 minutes or more in a `for` loop is one sleep."""
    job = zoo("sleep_units")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    end = report.chain[-1]["waits_on"]
    assert end["kind"] == "sleep" and end["sleep_left"].endswith("(about 8.3 h)"), end
    assert f"sleep_units.py:{job.info['sleep_line']})" in end["detail"], end
    assert_first_fix_is_about(report, "long-sleep", "sleeps at save_with_retry (")


def test_a_preexec_fn_waiting_for_a_lock_another_thread_held_at_the_fork_is_fork_held(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j07: Popen(preexec_fn=set_limits) from a trainer whose reloader thread holds
    cfg_lock; the child waits for it before its exec. The chain was right, but the cause was io-stall
    and the fix "Put the data on a local SSD". The child's frames (subprocess's C fork-exec under the
    Python function) say it runs a preexec_fn in a copy of a threaded parent."""
    job = zoo("preexec_lock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, job.info["child_pid"]], report.chain
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "fork-held" and end.get("preexec") == "yes", end
    assert_first_fix_is_about(report, "fork-preexec-fn", "runs a Popen preexec_fn in a copy of pid")


def test_an_item_the_queues_feeder_could_not_pickle_is_named_at_the_exited_producer(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j02: a record holding a lambda is put on a multiprocessing Queue; the feeder
    thread prints the traceback and drops it, the producer exits 0, and the trainer waits in get(). The
    log's traceback was not used. As for any dead producer, no cause is claimed: the child is blamed."""
    job = zoo("queue_unpicklable")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert {d.cause for d in report.diagnoses if d.confidence >= 0.5} == set(), top(report)
    assert report.chain[-1]["pid"] == job.info["child_pid"], report.chain
    assert any("Can't pickle local object" in e for log in report.logs for e in log.get("feeder_errors") or [])
    assert_first_fix_is_about(report, "dead-process", "(exit code 0; its queue dropped an item it could not pickle)")


def test_a_poll_on_an_eventfd_whose_only_child_died_names_that_child(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j14: a ZeroMQ REQ socket waits (poll on its eventfd) for a REP child that
    raised. The chain ended at "waits in poll() on anon": no cause, no culprit, "Put the data on a local
    SSD". A poll no hop can follow, in a process whose only child exited with an error, goes there."""
    job = zoo("poll_dead_server")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, job.info["child_pid"]], report.chain
    assert report.chain[0]["waits_on"].get("dead_child") == str(job.info["child_pid"]), report.chain[0]
    assert_first_fix_is_about(report, "dead-process", "has died (exit code 1)")


def test_a_joined_thread_that_follows_an_endless_childs_output_ends_at_the_child(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j18: the main thread joins a thread that reads `tail -F`'s output line by
    line. tail was named, with "put a timeout on every wait"; the child is to be stopped first."""
    job = zoo("follower_joined")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]
    assert end["pid"] == job.info["tail_pid"] and end["waits_on"].get("end") == "runs-forever", report.chain
    assert end["waits_on"].get("followed") == "yes", end
    assert_first_fix_is_about(report, "endless-child-followed", "runs `tail -F -n 0 ")


def test_a_writer_blocked_on_a_full_queue_that_only_its_joiner_reads_is_named(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j25: at SIGTERM the loop stops reading and joins the prefetch thread, which
    waits in put() on the full queue. It read "find what should set it"."""
    job = zoo("join_full_queue")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "join-full-queue" and end.get("queue") == "q", end
    assert_first_fix_is_about(report, "join-before-drain", "waits for room in q, which only the thread that joins it")


def test_a_pool_whose_workers_wait_on_a_queue_only_a_task_queued_behind_them_drains_is_named(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j09: ThreadPoolExecutor(max_workers=2) runs two shard readers blocked in
    put() on a full queue; the packer, its only reader, waits in the pool's work queue. It read "put
    a timeout on every wait", the pool and the packer unnamed."""
    job = zoo("pool_queued_behind")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("kind") == "pool" and end.get("end") == "queued-behind", end
    assert end.get("queue") == "samples" and end.get("queued") == "pack_batches", end
    assert_first_fix_is_about(report, "pool-queued-behind", "pack_batches")


def test_dataloader_workers_gated_on_an_event_the_loop_clears_and_never_sets_name_the_clear(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j22: the loop clears a multiprocessing Event to pause its persistent
    DataLoader workers for evaluation and never sets it again. It read "waits for a signal another
    thread has not sent", with a generic Condition fix."""
    job = zoo("dataloader_paused")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "event-cleared" and end.get("cleared_event") == "loading", end
    assert re.fullmatch(r"(\S+/)?dataloader_paused\.py:\d+", end["cleared_at"]), end
    assert_first_fix_is_about(report, "event-cleared-never-set", "Event loading is cleared at")


def test_forked_loader_workers_waiting_on_a_queue_only_the_parents_thread_fills_name_that_thread(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j01: an IterableDataset starts its prefetch thread in __init__, and the
    forked DataLoader workers wait on their copies of its queue. It read "make a stuck loader fail"."""
    job = zoo("dataloader_forked_prefetch")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "dataloader", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "fork-filler" and end.get("queue") == "self.buffer", end
    assert end.get("forked_by") == str(job.proc.pid) and "'shard-prefetch'" in end.get("filled_by", ""), end
    assert_first_fix_is_about(report, "fork-lost-filler", "Start the thread that fills self.buffer in each worker")


def test_two_threads_at_one_condition_woken_with_notify_are_named(knowledge, zoo):  # noqa: F811
    """The fourteenth hunt's j24: cond.notify() wakes one of two consumers, and the trainer waits for
    both to acknowledge. It read "waits for a signal another thread has not sent", not notify_all()."""
    job = zoo("condition_notify_one")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "notify-one" and re.fullmatch(r"(\S+/)?condition_notify_one\.py:\d+", end["notify_at"]), (
        end
    )
    assert_first_fix_is_about(report, "condition-notify-one", "Several threads wait on one Condition")


def test_a_new_group_every_rank_waits_in_after_one_made_on_some_ranks_names_that_call(knowledge, zoo):  # noqa: F811
    """The twelfth hunt's j08: an earlier new_group under `if rank == 0`, then every rank in the next
    new_group, whose names now differ. It was a rendezvous/collective tie and a store timeout fix. The
    job ends one of two ways (a race inside torch): both ranks in the second new_group, or rank 1 past
    it in all_reduce (then a collective mismatch); the fix names the call either way (the CI run on
    02cdb0a met the second, which had the generic mismatch fix then)."""
    from debug_stuck.advice import advise

    job = zoo("gloo_ranks", args=["subgroup"])
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    fix = advise(report, load_knowledge()).diagnoses[0].fixes[0]
    assert re.match(
        r"The new_group at gloo_ranks\.py:\d+, inside `if rank == 0:` runs on some ranks only", fix.title
    ), fix
    assert "dist.new_group([0, 1])  # on every rank" in fix.commands[0], fix.commands


def test_a_helper_that_inherited_a_blocked_sigterm_is_named_as_the_stop_that_never_arrives(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's j19: the trainer blocks SIGTERM around its setup, starts a helper inside
    that window and later waits in terminate(); wait(). It was external-service 90%, "Give every network
    call a timeout": the helper's accept loop was read as a service that never answers."""
    job = zoo("helper_sigterm_blocked")
    server = job.info["server_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, server], report.chain
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "signal-blocked" and end.get("held_signals") == "SIGTERM", end
    assert end.get("mask_from") == str(job.proc.pid), end
    assert re.fullmatch(r"(\S+/)?helper_sigterm_blocked\.py:\d+", end["mask_at"]), end
    assert report.culprit and report.culprit["pid"] == server, report.culprit
    assert_first_fix_is_about(
        report, "child-signal-blocked-at", "The pthread_sigmask call at ", "blocks SIGTERM", "terminate() stops"
    )


def test_a_blocking_call_from_the_event_loop_to_its_own_server_is_loop_blocked(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's j26: a coroutine makes a blocking HTTP call to the endpoint the same event
    loop serves. It was external-service 93%, "127.0.0.1:18426 never answers; give the call a timeout"."""
    job = zoo("loop_calls_own_server")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "loop-blocked" and end.get("own_server") == f"127.0.0.1:{job.info['port']}", end
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid], report.chain  # it waits for itself
    assert_first_fix_is_about(report, "loop-calls-own-server", "Never block the event loop", "served by that same loop")


def test_a_write_to_a_pipe_its_own_thread_reads_under_the_lock_that_thread_needs_is_a_cycle(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's j18: stderr goes into an os.pipe() a forwarder thread reads, taking the step's
    lock per line; the step prints a large dump while holding that lock. It was output-blocked 93%,
    "Drain the pipe to a file": the pipe's reader is the job's own thread, blocked by the writer."""
    job = zoo("stderr_forwarder_lock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "pipe-under-lock" and end.get("lock") == "state_lock", end
    names = [party.get("name") for party in end.get("threads") or []]
    assert names == ["MainThread", "stderr-forwarder"], end
    assert_first_fix_is_about(report, "pipe-under-lock", "thread 'stderr-forwarder' reads while holding state_lock")


def test_a_loop_on_is_alive_of_a_child_a_sigchld_handler_reaped_names_the_handler(knowledge, zoo):  # noqa: F811
    """The fifteenth hunt's j15: a SIGCHLD handler that reaps any child takes the index builder's exit
    status; `while builder.is_alive()` loops for ever, logging as it goes. No cause was named."""
    job = zoo("mp_child_reaped")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "child-reaped" and end.get("polled") == "builder.is_alive()", end
    assert re.fullmatch(r"reap_children \(mp_child_reaped\.py:\d+\)", end.get("reaper", "")), end
    assert_first_fix_is_about(report, "child-reaped-by-handler", "reap_children", "reap only the PIDs you started")


def test_a_request_queued_behind_a_long_poll_on_a_one_thread_server_names_the_server(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j13: a long-poll handler on the job's own single-threaded HTTPServer child
    waits for a /publish that sits in its backlog. It was external-service, "give urlopen() a timeout"."""
    job = zoo("one_thread_server")
    server = job.info["server_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, server], report.chain
    assert report.chain[-1]["waits_on"].get("end") == "one-thread-server", report.chain[-1]
    assert report.culprit and report.culprit["pid"] == server, report.culprit
    assert_first_fix_is_about(report, "one-thread-server", "Serve requests on threads", "ThreadingHTTPServer")


def test_an_event_loop_and_its_server_child_both_waiting_to_read_are_a_cycle(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j17: the client's readexactly(n) waits for bytes the server's framing never
    sends, and the asyncio server awaits the next request. It was external-service, "never answers"."""
    job = zoo("asyncio_frame_mismatch")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain][:2] == [job.proc.pid, job.info["server_pid"]], report.chain
    assert report.chain[-1]["waits_on"].get("kind") == "cycle", report.chain[-1]
    assert_first_fix_is_about(report, "socket-both-read", "both wait to read on one connection")


def test_a_rank_that_enters_a_barrier_holding_the_lock_the_other_rank_wants_is_the_culprit(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j02: rank 0 takes the shared cache's lock and enters barrier; rank 1 waits
    for that lock. The culprit was rank 1 (the rank "elsewhere"), the fix "let it finish, or stop it"."""
    pytest.importorskip("torch")
    job = zoo("gloo_ranks", args=["lock_across"])
    report = diagnose(knowledge, job.info["rank0_pid"])
    assert report.verdict.hung is True, top(report)
    assert report.culprit is not None and report.culprit["pid"] == job.info["rank0_pid"], report.culprit
    assert "waits in the collective for rank 1" in report.culprit["reason"], report.culprit
    assert_first_fix_is_about(report, "lock-across-collective", "features.lock before the collective")


def test_a_rank_serving_batches_from_a_thread_blocked_by_its_own_collective_is_the_culprit(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j26: rank 0 serves rank 1's batches from a thread under data_lock, and enters
    all_reduce holding data_lock. It was external-service, rank 1 (the waiter) the culprit."""
    pytest.importorskip("torch")
    job = zoo("gloo_ranks", args=["batch_server"])
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, rank0)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain][:4] == [rank0, rank1, rank0, rank0], report.chain
    assert report.chain[2]["thread"]["name"] == "batch-server", report.chain[2]
    assert report.chain[2]["waits_on"].get("lock") == "data_lock", report.chain[2]
    assert report.culprit is not None and report.culprit["pid"] == rank0, report.culprit


def test_a_worker_whose_trainer_was_killed_is_named_an_orphan(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j21: the trainer was SIGKILLed (OOM) and its non-daemon multiprocessing worker,
    re-parented, waits in tasks.get() for ever. It was "waits for an item from a queue", a timeout fix."""
    job = zoo("orphan_worker")
    worker = job.info["pid"]
    with open(f"/proc/{worker}/stat") as fh:
        parent = int(fh.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{parent}/cmdline", "rb") as fh:
        if b"python" in fh.read().split(b"\0")[0]:
            pytest.skip("the orphan's new parent runs Python here (a Python init): it cannot be told from a parent")
    report = diagnose(knowledge, worker)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "orphaned" and end.get("parent_pid") == str(parent), end
    assert_first_fix_is_about(report, "orphaned-worker", "is an orphan", "restart the job from its last checkpoint")


def test_a_barrier_action_that_waits_for_what_the_parties_put_after_the_barrier_is_a_cycle(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j09: a Barrier's action takes the shards' gradients from a queue the shard
    threads fill only after the barrier. The fix said the putting thread had ended, which was false."""
    job = zoo("barrier_action_queue")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    details = " ".join(hop["waits_on"]["detail"] for hop in report.chain)
    assert "whose action thread" in details and "puts into only at" in details, report.chain
    assert report.chain[-1]["waits_on"]["kind"] == "cycle", report.chain[-1]
    fix = report.diagnoses[0].fixes[0] if report.job else None
    assert_first_fix_is_about(report, "put-after-wait", "puts into grads only at worker")
    assert fix is None or "has ended" not in fix.title


def test_a_send_to_a_log_agent_that_stopped_reading_names_the_agent(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j12: SysLogHandler sends to a local log agent (outside the job) that stopped
    reading its unix datagram socket. It was output-blocked, "Drain the pipe to a file", the agent unnamed."""
    job = zoo("log_agent_stopped")
    agent = job.info["agent_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "external-service", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "not-reading" and end.get("reader") == str(agent), end
    assert report.culprit and report.culprit["pid"] == agent, report.culprit
    assert_first_fix_is_about(report, "socket-reader-stopped", f"The local service pid {agent}")


def test_a_ranks_thread_in_a_collective_the_other_rank_makes_later_is_told_to_keep_one_order(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j14: rank 1's main thread waits for its meta-sync thread, which waits in a
    broadcast rank 0 makes only after the all_reduce it waits in. The fix said "the pool thread"."""
    pytest.importorskip("torch")
    job = zoo("gloo_ranks", args=["meta_thread"])
    rank0, rank1 = job.info["rank0_pid"], job.info["rank1_pid"]
    report = diagnose(knowledge, rank0)
    assert report.verdict.hung is True, top(report)
    assert [hop["pid"] for hop in report.chain][:3] == [rank0, rank1, rank1], report.chain
    assert report.chain[2]["thread"]["name"] == "meta-sync", report.chain[2]
    assert_first_fix_is_about(report, "thread-collective-out-of-order", "issue the collectives in one order")


def test_two_processes_opening_different_fifos_first_are_an_open_order_deadlock(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j10: the trainer opens to_eval first, its evaluator child from_eval first; each
    waits in open() for the other. It was io-stall, "no reader: start its reader", the child unseen."""
    job = zoo("fifo_open_order")
    child = job.info["child_pid"]
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    assert [hop["pid"] for hop in report.chain] == [job.proc.pid, child, job.proc.pid], report.chain
    assert_first_fix_is_about(report, "fifo-open-order", "open the FIFOs in one order on both sides")


def test_a_pause_whose_interval_timer_an_alarm_cancelled_names_the_alarm(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j16: a loop paced by setitimer and signal.pause(), and a timeout helper whose
    signal.alarm(0) cancels the shared timer. No cause, and the first fix was "Put the data on a local SSD"."""
    job = zoo("paced_pause")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True, top(report)
    assert report.chain[-1]["waits_on"]["kind"] == "signal", report.chain
    assert_first_fix_is_about(report, "pause-timer-clash", "The signal.alarm() call at paced_pause.py:")


def test_an_asyncio_queue_join_a_skipped_task_done_holds_up_is_named(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j07: a worker coroutine skips an empty document with `continue` before
    q.task_done(), and the main coroutine awaits q.join(). The fix said a task had died (TaskGroup)."""
    job = zoo("asyncio_task_done")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "no-task" and end.get("queue") == "q", end
    assert re.fullmatch(r"worker \((\S+/)?asyncio_task_done\.py:\d+\)", end.get("skip_at", "")), end
    assert_first_fix_is_about(report, "asyncio-task-done-skipped", "q.join() never returns: call it in a finally")


def test_asyncio_semaphore_permits_kept_by_an_early_return_are_named(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j06: a shard loader returns from its except between `await sem.acquire()` and
    `sem.release()`; two corrupt shards keep both permits. The fix said a task had died (TaskGroup)."""
    job = zoo("asyncio_permits")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "no-task" and end.get("semaphore") == "sem", end
    assert_first_fix_is_about(report, "asyncio-permits-leaked", "leaves holding a permit of sem")


def test_a_coroutine_holding_a_lock_across_the_await_of_a_thread_that_needs_it_is_named(knowledge, zoo):  # noqa: F811
    """The sixteenth hunt's j25: `with state_lock:` around `await asyncio.to_thread(write_shard)`, and
    write_shard takes state_lock. The chain stopped at the idle event loop."""
    job = zoo("await_thread_lock")
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause == "thread-deadlock", top(report)
    end = report.chain[-1]["waits_on"]
    assert end.get("end") == "held-across-await" and end.get("lock") == "state_lock", end
    assert end.get("held_across_await", "").startswith("save_checkpoint ("), end
    assert_first_fix_is_about(report, "lock-held-across-await", "release the lock before the await")


def test_a_job_frozen_by_its_cgroup_freezer_is_named_frozen(knowledge, zoo, request):  # noqa: F811
    """The seventeenth hunt's j08: a job frozen by the cgroup freezer (docker pause, SLURM suspend) was read
    as DataLoader workers stuck in the kernel (its threads in D state). Needs root and the v1 freezer."""
    from pathlib import Path

    root = Path("/sys/fs/cgroup/freezer")
    if os.geteuid() != 0 or not (root / "cgroup.procs").exists():
        pytest.skip("freezing a cgroup needs root and the cgroup v1 freezer hierarchy")
    pytest.importorskip("torch")
    job = zoo("healthy")
    group = root / f"debug-stuck-test-{os.getpid()}-{job.proc.pid}"
    group.mkdir()

    def thaw_and_remove() -> None:  # by PID: thaw, kill what the group holds, remove it
        (group / "freezer.state").write_text("THAWED")
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while (group / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.1)
        group.rmdir()

    request.addfinalizer(thaw_and_remove)
    for process in job.processes():
        (group / "cgroup.procs").write_text(str(process.pid))
    (group / "freezer.state").write_text("FROZEN")
    deadline = time.monotonic() + 10
    while (group / "freezer.state").read_text().strip() != "FROZEN" and time.monotonic() < deadline:
        time.sleep(0.1)
    report = diagnose(knowledge, job.proc.pid)
    assert report.verdict.hung is True and report.verdict.cause != "dataloader", top(report)
    assert report.chain[-1]["waits_on"].get("state") == "frozen", report.chain[-1]
    assert_first_fix_is_about(report, "job-frozen", "is frozen by its cgroup's freezer: thaw it")
