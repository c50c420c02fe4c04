"""Snapshot <-> compact JSON: a real snapshot of a hung zoo job survives the trip, the classifier
reads the copy as it reads the original, and the stack table makes the wire form smaller."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from zoo.fixtures import zoo  # noqa: F401

from conftest import parse_cli
from debug_stuck.core.classify import Observations
from debug_stuck.frontends.commands.snapshot import run as run_snapshot
from debug_stuck.live.collect import Snapshot, collect
from debug_stuck.live.culprit import find_culprit
from debug_stuck.live.merge import merge_groups
from debug_stuck.live.nodes import parse_wire_objects
from debug_stuck.live.observe import StackGroup, compress_numbers, describe_ranks, group_ranks, observe
from debug_stuck.live.progress import judge_progress
from debug_stuck.live.slurm import _split_labelled
from debug_stuck.live.wire import (
    WireError,
    distinct_stacks,
    snapshot_from_wire,
    snapshot_to_wire,
    thread_count,
)
from debug_stuck.probes.collectors.gpu.backends import RecordedBackend
from debug_stuck.probes.collectors.gpu.collect import collect_gpus

GPU_FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu"


def trip(snap: Snapshot) -> Snapshot:
    text = json.dumps(snapshot_to_wire(snap, node="node-7"), separators=(",", ":"))
    return snapshot_from_wire(json.loads(text))


def obs_lines(snap: Snapshot):
    obs = Observations()
    observe(snap, obs)
    return {k: [(ln.text, ln.subject, ln.pid) for ln in v] for k, v in obs.lines.items()}, obs.derived


@pytest.fixture
def straggler_snapshot(zoo):  # noqa: F811
    pytest.importorskip("torch")
    job = zoo("gloo_straggler", nproc_per_node=3)
    return collect([job.proc.pid], window=0.5, native=True), job


def test_a_real_snapshot_round_trips(knowledge, straggler_snapshot):
    snap, job = straggler_snapshot
    copy = trip(snap)
    assert [p.to_dict() for p in copy.processes] == [p.to_dict() for p in snap.processes]
    assert copy.to_dict()["stacks"] == snap.to_dict()["stacks"]
    assert obs_lines(copy) == obs_lines(snap)
    assert judge_progress(copy) == judge_progress(snap)
    groups = group_ranks(copy)
    labels = [describe_ranks(g) for g in groups]
    assert labels == [describe_ranks(g) for g in group_ranks(snap)] == ["ranks 0,2", "rank 1"]
    culprit = find_culprit(knowledge, groups)
    assert culprit is not None and culprit.rank == 1 and culprit.pid == job.rank(1).pid
    assert copy.errors == snap.errors and copy.notes == snap.notes
    assert (copy.gpus is None) == (snap.gpus is None)
    if snap.kernel is not None:
        assert copy.kernel.interesting() == snap.kernel.interesting()
        assert copy.kernel.lines[-50:] == snap.kernel.lines[-50:]


def test_stack_dedup_makes_the_wire_form_smaller(straggler_snapshot):
    snap, _ = straggler_snapshot
    wire = snapshot_to_wire(snap)
    compact = len(json.dumps(wire, separators=(",", ":")))
    full = len(json.dumps(snap.to_dict(), separators=(",", ":")))
    # 4 processes sampled twice, ranks 0 and 2 in the same stack: fewer stacks than thread samples
    # (the last round unwinds native frames once per distinct stack, so a rank's two samples differ)
    assert thread_count(snap) >= 8
    assert distinct_stacks(wire) < thread_count(snap), (distinct_stacks(wire), thread_count(snap))
    assert compact < full * 0.6, (compact, full)
    print(f"\nwire {compact} bytes vs to_dict {full} bytes; {distinct_stacks(wire)} stacks for {thread_count(snap)}")


def test_recorded_gpus_round_trip():
    gpus = collect_gpus(backend=RecordedBackend(GPU_FIXTURES / "nvml-a100-ecc-thermal.json"), samples=1)
    snap = Snapshot(host="h", taken_at=0.0, window=1.0, processes=[], gpus=gpus)
    copy = trip(snap)
    assert [d.to_dict() for d in copy.gpus.devices] == [d.to_dict() for d in gpus.devices]
    assert [p.to_dict() for p in copy.gpus.processes] == [p.to_dict() for p in gpus.processes]
    assert obs_lines(copy) == obs_lines(snap)


def test_snapshot_command_prints_one_json_line(straggler_snapshot):
    _, job = straggler_snapshot
    out = io.StringIO()
    with redirect_stdout(out):
        code = run_snapshot(parse_cli("snapshot", "--pid", str(job.proc.pid), "--window", "0.5"))
    assert code == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    copy = snapshot_from_wire(json.loads(lines[0]))
    assert sorted(p.rank for p in copy.processes if p.role == "rank") == [0, 1, 2]


def test_snapshot_of_a_missing_process_is_an_error_record():
    proc = subprocess.run(
        [sys.executable, "-m", "debug_stuck", "snapshot", "--pid", "999999999"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3
    record = json.loads(proc.stdout)
    assert record["exit_code"] == 3 and "does not exist" in record["error"] and record["node"]
    assert len(proc.stderr.strip().splitlines()) == 1
    with pytest.raises(WireError, match="sent no snapshot"):
        snapshot_from_wire(record)
    with pytest.raises(WireError):
        snapshot_from_wire({"format": "something else"})


def test_srun_cut_lines_are_joined_back():
    wire = json.dumps({"format": "debug-stuck-snapshot", "version": 1, "text": "x" * 3000})
    pieces = [wire[i : i + 1024] for i in range(0, len(wire), 1024)]
    assert parse_wire_objects("".join(pieces)) == [json.loads(wire)]
    assert parse_wire_objects("noise {not json} " + wire + "\n") == [json.loads(wire)]
    # two tasks' pieces interleaved, labels padded as srun pads them for 10+ tasks
    other = json.dumps({"format": "debug-stuck-snapshot", "version": 1, "node": "b"})
    text = "\n".join([f" 0: {pieces[0]}", f"11: {other}", f" 0: {pieces[1]}", f" 0: {pieces[2]}", "srun: note"])
    by_task, rest = _split_labelled(text + "\n")
    assert sorted(by_task) == [0, 11] and rest == ["srun: note"]
    assert parse_wire_objects("".join(by_task[0])) == [json.loads(wire)]
    assert parse_wire_objects("".join(by_task[11])) == [json.loads(other)]


def test_rank_ranges_and_node_names_in_group_labels():
    assert compress_numbers([0, 1, 2, 3, 5, 7, 8, 9, 12]) == "0-3,5,7-9,12"
    assert compress_numbers([0, 1]) == "0,1"
    ranks = [r for r in range(64) if r != 62]
    hosts = [f"n{r // 8}" for r in ranks]
    big = StackGroup((("all_reduce", "c10d.py"),), "all_reduce", list(range(63)), ranks, [], hosts)
    odd = StackGroup((("__getitem__", "data.py"),), "__getitem__", [99], [62], [], ["node-7"])
    assert describe_ranks(big) == "ranks 0-61,63 (8 nodes)"
    assert describe_ranks(odd) == "rank 62 (node-7)"
    plain = StackGroup((("f", "x.py"),), "f", [10, 11], [None, None], [], [None, None])
    assert describe_ranks(plain) == "pids 10,11"


def test_groups_merge_across_nodes_by_stack():
    sig_wait, sig_odd = (("all_reduce", "c10d.py"),), (("__getitem__", "data.py"),)
    parts = [
        StackGroup(sig_wait, "t", [100, 101], [9, 8], [], ["b", "b"]),
        StackGroup(sig_wait, "t", [100, 101], [0, 1], [], ["a", "a"]),
        StackGroup(sig_odd, "t", [102], [10], [], ["b"]),
    ]
    merged = merge_groups(parts)
    assert [g.ranks for g in merged] == [[0, 1, 8, 9], [10]]
    assert merged[0].hosts == ["a", "a", "b", "b"] and merged[0].pids == [100, 101, 101, 100]
    # a busy rank a node took apart from its waiting ranks (same Python stack, one computing) stays apart
    busy = StackGroup(sig_wait, "t", [103], [11], [], ["b"], apart=True)
    merged = merge_groups([*parts, busy])
    assert [g.ranks for g in merged] == [[0, 1, 8, 9], [10], [11]] and merged[2].apart


def test_a_native_frames_shared_object_round_trips():
    # py-spy names a native frame's shared object in `module` when `file` is its C source (a Python
    # built with its symbols): the wire form keeps it, so a remote node's parse reads as a parse
    from debug_stuck.probes.collectors.procs import ProcInfo
    from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

    scanner = Frame("scan_once_unicode", "_json.c", 1066, native=True, path="/b/Modules/_json.c",
                    module="/py/lib/python3.11/lib-dynload/_json.cpython-311-x86_64-linux-gnu.so")  # fmt: skip
    python = Frame("raw_decode", "json/decoder.py", 353, path="/py/lib/python3.11/json/decoder.py")
    thread = ThreadStack(tid=41, name="MainThread", state="active", frames=[scanner, python])
    process = ProcInfo(pid=41, ppid=1, name="python", cmdline=["python", "load.py"], role="rank")
    series = StackSeries(41, [StackDump(pid=41, threads=[thread], tool="py-spy", seconds=0.1)])
    snap = Snapshot(host="h", taken_at=0.0, window=1.0, processes=[process], stacks={41: series})
    frames = trip(snap).stacks[41].latest().threads[0].frames
    assert frames == [scanner, python]
