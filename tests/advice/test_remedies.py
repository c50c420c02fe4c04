"""The remedies table (skills/data/remedies.yaml) and the fix for a wait that ends at a process
that died: its wait status read from a real zombie, decoded into the signal and what it means.

The live hangs (FIFOs, sockets, locks, stale lock files, prompts, deadlocks, ranks) are diagnosed
end to end in tests/live/test_chains.py and tests/pipeline/test_framework_hangs.py; a zombie is not
a hang any zoo job can hold (every parent there reaps its children), so this one chain is built
from a real zombie's /proc entry.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from debug_stuck.advice.facts import JobFacts
from debug_stuck.advice.remedy import remedy_for
from debug_stuck.kb import load_knowledge, load_table
from debug_stuck.probes.collectors.procs import read_process

pytestmark = pytest.mark.timeout(60)


def test_every_remedy_pattern_compiles_and_names_only_known_values():
    table = load_table("remedies.yaml")
    ids = [entry["id"] for entry in table["remedies"]]
    assert len(ids) == len(set(ids))
    for entry in table["remedies"]:
        re.compile(entry["when"])
        assert entry["title"] and entry["why"] and entry["source"], entry["id"]
        for step in entry.get("steps") or []:
            assert step["safety"] in ("reads", "disturbs", "changes", "stops-job", "edit", "config"), step
            if step["safety"] in ("disturbs", "changes", "stops-job"):
                assert step.get("note"), f"{entry['id']}: a step that acts says what it does"
    # a remedy that stands for a playbook's fix names one that exists
    titles = {fix.title for playbook in load_knowledge().playbooks.values() for fix in playbook.fixes}
    for entry in table["remedies"]:
        for title in entry.get("covers") or ():
            assert title in titles, (entry["id"], title)


@pytest.fixture
def zombie():
    """A child killed by SIGKILL that its parent (this test) has not reaped yet."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while read_process(child.pid).state != "Z" and time.monotonic() < deadline:
        time.sleep(0.02)
    yield child
    child.wait(timeout=10)


def test_a_wait_that_ends_at_a_dead_worker_says_how_it_died(zombie, knowledge):
    info = read_process(zombie.pid)
    assert info.state == "Z" and info.exit_status is not None and info.exit_status & 0x7F == signal.SIGKILL
    worker = dict(info.to_dict(), role="dataloader-worker", threads=[])
    next_batch = {"function": "_next_data", "file": "torch/utils/data/dataloader.py", "line": 1300}
    trainer = {"pid": 1000, "role": "rank", "threads": [{"tid": 1000, "frames": [next_batch]}]}
    chain = [
        {"pid": 1000, "role": "rank", "who": "process pid 1000", "waits_on": {"kind": "worker", "object": "x"}},
        {
            "pid": zombie.pid,
            "role": "dataloader-worker",
            "who": f"DataLoader worker pid {zombie.pid}",
            "waits_on": {"kind": "process", "state": "Z", "detail": "has exited (zombie)"},
            "terminal": True,
        },
    ]
    report = SimpleNamespace(
        chain=chain,
        processes=[trainer, worker],
        verdict=SimpleNamespace(finding={"kind": "chain", "text": ""}),
    )
    fix = remedy_for(report, JobFacts(values={"log": "/tmp/train.log"}), knowledge)
    assert fix is not None and fix.basis.startswith("dead-process")
    assert fix.title == f"DataLoader worker pid {zombie.pid} has died (signal 9); process pid 1000 still waits for it"
    assert "killed by signal 9 (SIGKILL: the kernel's out-of-memory killer" in fix.why
    assert "prefetch_factor" in fix.why  # a DataLoader worker's own advice
    # a worker of a job with no DataLoader (a multiprocessing child): not the DataLoader's advice
    report.processes = [dict(trainer, threads=[]), worker]
    plain = remedy_for(report, JobFacts(values={"log": "/tmp/train.log"}), knowledge)
    assert "prefetch_factor" not in plain.why and "BrokenProcessPool" in plain.why, plain.why
    assert any(f"Killed process {zombie.pid}" in c for c in fix.commands)
    # one that exited with code 1 raised: no signal, so no kill in the kernel's log to look for (the
    # seventeenth hunt's j03 was sent to dmesg for an OOM kill after a KeyError)
    report.processes, report.logs = [trainer, dict(worker, exit_status=1 << 8)], []
    raised = remedy_for(report, JobFacts(values={"log": "/tmp/train.log"}), knowledge)
    assert raised.title.endswith("has died (exit code 1); process pid 1000 still waits for it"), raised.title
    assert not any("dmesg" in c for c in raised.commands) and any("Traceback" in c for c in raised.commands)


SWALLOWING = """
for batch in loader:
    try:
        loss = step(batch)          # 4
    except ValueError:
        raise                       # 6: re-raised, the job stops
    except Exception as err:
        log.warning("skip %s", err)
        continue
try:
    setup()                         # 11: not in a loop
except Exception:
    pass
while True:
    try:
        dist.barrier()              # 16
    except Exception:
        raise RuntimeError("fatal")  # 18
"""


def test_a_try_that_lets_one_rank_go_on_is_one_in_a_loop_whose_except_never_raises():
    import ast

    from debug_stuck.advice.swallowed import swallowing_try

    tree = ast.parse(SWALLOWING)
    assert swallowing_try(tree, 4) == (3, 7)  # the second handler goes on past the error
    assert swallowing_try(tree, 11) is None  # once, before the loop: every rank stops or none
    assert swallowing_try(tree, 16) is None  # its only handler raises
    assert swallowing_try(None, 4) is None


def test_one_rank_still_in_ddps_backward_below_the_others_wait_reads_as_uneven_inputs():
    """The seventh hunt's ddp_uneven printed no progress lines: rank 0 in DDP's backward at line 18,
    rank 1 in the barrier after the loop, line 22 of the same function. The fix names uneven inputs and
    DDP's join(). A rank ahead in the loop (accelerate's gather on the main process, another function)
    is no sign of them."""
    from debug_stuck.advice.uneven import uneven_words

    backward = {"who": "rank 0", "collective": "DDP's gradient all-reduce (in backward)"}
    uneven = {
        "sides": [
            dict(backward, site="main (/jobs/ddp/train.py:18) via backward"),
            {"who": "rank 1", "collective": "barrier", "site": "main (/jobs/ddp/train.py:22)"},
        ]
    }
    words = uneven_words(uneven, "")
    assert words.startswith("rank 0 is still in a backward pass") and "model.join()" in words, words
    gather = {
        "sides": [
            {"who": "rank 0", "collective": "all_gather", "site": "on_step_end (/jobs/acc/train.py:12)"},
            {"who": "rank 1", "collective": backward["collective"], "site": "main (/jobs/acc/train.py:30)"},
        ]
    }
    assert uneven_words(gather, "") == ""
    earlier = {"sides": [uneven["sides"][0], dict(uneven["sides"][1], site="main (/jobs/ddp/train.py:9)")]}
    assert uneven_words(earlier, "") == ""
    assert "rank 0 counts to 5" in uneven_words(uneven, "rank 0 counts to 5, rank 1 counts to 3")


SUBGROUP = """\
import torch.distributed as dist
def train(rank, cfg):
    if {guard}:
        dist.new_group([0])          # 4
    pair = dist.new_group([0, 1])    # 5
    dist.all_reduce(pair)            # 6
    dist.barrier()                   # 7
"""


@pytest.mark.parametrize(
    "guard, others_at, named",
    [
        ("rank == 0", None, "Every rank waits in new_group at train.py:5"),
        ("rank == 0", 6, "rank 0 (pid {pid}) waits in new_group at train.py:5, while rank 1 (pid {pid}) went on"),
        ("rank == 0", 7, "rank 0 (pid {pid}) waits in new_group at train.py:4, inside `if rank == 0:`, while rank 1"),
        ("cfg.tensor_parallel", None, "Every rank waits in new_group at train.py:5"),
        ("cfg.tensor_parallel", 6, None),
        ("cfg.tensor_parallel", 7, None),  # a flag holds on every rank: nothing says one skipped the call
    ],
)
def test_a_rank_conditional_new_group_is_named_whether_the_ranks_all_wait_in_the_next_or_one_went_past(
    tmp_path, guard, others_at, named
):
    """gloo_ranks subgroup ends one of two ways, a race inside torch: both ranks in the second new_group,
    or rank 1's new_group met rank 0's first one (same group name) and rank 1 went on to all_reduce.
    The stacks below are the two ends as the live job showed them (frames cut to the job's own)."""
    from debug_stuck.advice.subgroup import conditional_new_group

    source = tmp_path / "train.py"
    source.write_text(SUBGROUP.format(guard=guard))
    in_group = [{"function": "new_group", "file": "torch/distributed/distributed_c10d.py", "line": 5863}]

    def rank(index, line):
        own = {"function": "train", "file": "train.py", "path": str(source), "line": line}
        frames = (in_group if line in (4, 5) else []) + [own]
        return {"pid": os.getpid(), "rank": index, "role": "rank", "threads": [{"tid": os.getpid(), "frames": frames}]}

    # at 7 the other rank went on to the barrier, and rank 0 waits in the new_group under its `if`
    report = SimpleNamespace(processes=[rank(0, 4 if others_at == 7 else 5), rank(1, others_at or 5)])
    reader = SimpleNamespace(is_own=lambda frame: frame.get("file") == "train.py")
    values = {}
    conditional_new_group(values, report, reader)
    if named is None:
        assert values == {}
        return
    assert values["subgroup_at"] == f"train.py:4, inside `if {guard}:`"
    assert values["subgroup_wait"].startswith(named.format(pid=os.getpid())), values


@pytest.mark.parametrize(
    "start, named",
    [('ctx = mp.get_context("spawn")', True), ('mp.set_start_method("forkserver")', True), ("ctx = mp", False)],
)
def test_a_queue_made_at_import_is_named_only_when_the_file_starts_its_children_afresh(tmp_path, start, named):
    """With fork a child shares the module-level queue: the read waits on something else (then the
    generic pipe-writer-gone remedy, no claim about imports)."""
    from debug_stuck.advice.modulequeue import module_queue

    source = tmp_path / "train.py"
    source.write_text(f"import multiprocessing as mp\n{start}\nresults = mp.Queue()\n\nstats = results.get()\n")
    get = {"function": "Queue.get", "file": "multiprocessing/queues.py", "line": 103}
    own = {"function": "<module>", "file": "train.py", "path": str(source), "line": 5}
    end = {"pid": os.getpid(), "waits_on": {"kind": "pipe", "end": "no-thread"}}
    reader = SimpleNamespace(python_frames=lambda hop: [get, own], own_frame=lambda hop: own)
    values = {}
    module_queue(values, reader, end)
    assert values == ({"module_queue": "results", "module_queue_at": "train.py:3"} if named else {}), values


def test_a_thread_blocked_on_a_socket_closed_under_it_is_told_to_shut_it_down_first(knowledge):
    """The thirteenth hunt's j18 (no live test: a ptrace stop, as every stack read makes, restarts the
    accept, which then fails on the closed descriptor and the job goes on)."""
    main = {"pid": 1000, "role": "rank", "who": "process pid 1000", "waits_on": {"kind": "thread", "object": "1001"}}
    server = {
        "pid": 1000,
        "role": "rank",
        "thread": {"tid": 1001, "name": "status-server"},
        "who": "process pid 1000, thread 'status-server'",
        "waits_on": {"kind": "socket", "op": "accept", "end": "fd-closed", "fd": "3"},
        "terminal": True,
    }
    accept = {"function": "socket.accept", "file": "socket.py", "line": 294}
    own = {"function": "serve", "file": "train.py", "path": "/jobs/train.py", "line": 10}
    proc = {
        "pid": 1000,
        "role": "rank",
        "threads": [{"tid": 1001, "frames": [accept, own]}, {"tid": 1000, "frames": []}],
    }
    report = SimpleNamespace(
        chain=[main, server], processes=[proc], verdict=SimpleNamespace(finding={"kind": "chain", "text": ""})
    )
    fix = remedy_for(report, JobFacts(values={"log": "/tmp/train.log"}), knowledge)
    assert fix is not None and fix.basis.startswith("socket-closed-under-accept"), fix
    assert fix.title.startswith("Process pid 1000, thread 'status-server' is blocked on a socket another thread"), fix
    assert "srv.shutdown(socket.SHUT_RDWR)" in fix.commands[0], fix.commands
