"""A standard-library routine whose time grows with its input (a JSON parse, an unpickling) is work,
not a spin on the job's own line: live.helpers.computes_in_library with frames.yaml `computes`.

The stacks are py-spy `dump --native --json` of real processes (Python 3.11.7, py-spy 0.4.x): `json.load`
of a 770 MB annotation file and `pickle.load` of a 347 MB cache of it, each run from a script's own
line, recorded by hand (tests/fixtures/stacks/README.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from debug_stuck.live.collect import Snapshot
from debug_stuck.live.helpers import computes_in_library
from debug_stuck.probes.collectors.procs import ProcInfo
from debug_stuck.probes.collectors.stacks import StackDump, StackSeries, ThreadStack, _parse_pyspy_json

STACKS = Path(__file__).parents[1] / "fixtures" / "stacks"


def frozen_snapshot(dump: str, cpu: float = 99.0) -> tuple:
    """The recorded main thread, the same in two samples, its process running at `cpu` % CPU."""
    (thread,) = _parse_pyspy_json((STACKS / dump).read_text())
    pid = thread.tid

    def sample():
        return StackDump(
            pid=pid, threads=[ThreadStack(pid, "MainThread", "active", thread.frames)], tool="py-spy", seconds=0.1
        )

    process = ProcInfo(pid=pid, ppid=1, name="python", cmdline=["python", "job.py"], role="rank")
    process.state, process.cpu_percent = "R", cpu
    snap = Snapshot(
        host="h", taken_at=0.0, window=1.0, processes=[process], stacks={pid: StackSeries(pid, [sample(), sample()])}
    )
    return snap, pid


@pytest.mark.parametrize(
    "dump, where",
    [
        ("json-load-py-spy-native.json", "raw_decode (json/decoder.py:353)"),
        # caught in a collection the unpickler's allocations set off (gc_collect_main innermost)
        ("pickle-load-gc-py-spy-native.json", "load (_pickle.c), called from <module> (pickle_job.py:4)"),
    ],
)
def test_a_parse_or_an_unpickling_from_the_jobs_own_line_computes(knowledge, dump, where):
    snap, pid = frozen_snapshot(dump)
    assert computes_in_library(snap, knowledge, pid) == where


@pytest.mark.parametrize("dump", ["json-load-py-spy-native.json", "pickle-load-gc-py-spy-native.json"])
def test_the_same_stack_using_no_cpu_is_not_a_computation(knowledge, dump):
    snap, pid = frozen_snapshot(dump, cpu=0.0)
    snap.processes[0].state = "S"
    assert computes_in_library(snap, knowledge, pid) is None


@pytest.mark.parametrize("dump", ["json-load-py-spy-native.json", "pickle-load-gc-py-spy-native.json"])
def test_a_rank_parsing_is_no_loop_of_its_own_code(dump):
    # a rank that loads its annotations while another waits for it in a collective is one rank's long
    # pass, not a rank turning in its own loop (live.progress reads own_loop for the culprit)
    from debug_stuck.live.loops import own_loop

    snap, pid = frozen_snapshot(dump)
    assert own_loop(snap.stacks[pid], pid) is None


def unwound_natively(snap, pid) -> bool:
    return any(f.native for d in snap.stacks[pid].dumps for t in d.threads for f in t.frames)


def test_ranks_at_one_line_share_the_native_unwind_of_one_of_them(knowledge):
    # two healthy gloo ranks at the same matmul line; the sampler unwound only one of them natively
    from debug_stuck.core.classify import Observations
    from debug_stuck.live.assess import analyze
    from debug_stuck.live.wire import snapshot_from_wire

    snap = snapshot_from_wire(json.loads((STACKS / "gloo-matmul-torchrun-snapshot.json").read_text()))
    ranks = [p.pid for p in snap.processes if p.role == "rank"]
    unwound = [pid for pid in ranks if unwound_natively(snap, pid)]
    assert len(ranks) == 2 and len(unwound) == 1
    for pid in ranks:
        assert computes_in_library(snap, knowledge, pid) == (
            "mkl_blas_avx512_sgemm_kernel_0 (libtorch_cpu.so), called from <module> (ok_gloo_matmul.py:13)"
        )
    progress = analyze(knowledge, snap, Observations()).progress
    assert progress.hung is None and "a long computation and one that never ends" in progress.reasons[0], progress


def test_a_rank_at_another_line_borrows_no_native_unwind(knowledge):
    from debug_stuck.live.wire import snapshot_from_wire

    snap = snapshot_from_wire(json.loads((STACKS / "gloo-matmul-torchrun-snapshot.json").read_text()))
    ranks = [p.pid for p in snap.processes if p.role == "rank"]
    bare = next(pid for pid in ranks if not unwound_natively(snap, pid))
    for dump in snap.stacks[bare].dumps:  # the job's own loop, at a line the unwound rank is not at
        dump.threads[0].frames = [dataclasses.replace(f, line=99) for f in dump.threads[0].frames]
    assert computes_in_library(snap, knowledge, bare) is None
