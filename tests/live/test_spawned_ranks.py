"""Ranks started by torch.multiprocessing.spawn are told from DataLoader workers by the threads their
process group starts, not only by the frames a sample happens to catch (live/collect.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from debug_stuck.live.collect import _refine_roles
from debug_stuck.live.jobfacts import job_facts
from debug_stuck.live.wire import snapshot_from_wire
from debug_stuck.probes.collectors import stacks
from debug_stuck.probes.collectors.procs import ProcInfo, assign_roles

STACKS = Path(__file__).parents[1] / "fixtures" / "stacks"


@pytest.fixture
def spawn_snapshot(monkeypatch):
    """The recorded snapshot of two healthy mp.spawn gloo ranks (rank 0 in torch.save, rank 1 between
    barriers), roles and ranks taken back to what command lines alone say, as collection starts from.
    The index each rank was given is what py-spy --locals read live of spawn's _wrap: the replay answers
    that read from the recording (the processes are gone)."""
    snap = snapshot_from_wire(json.loads((STACKS / "gloo-spawn-save-barrier-snapshot.json").read_text()))
    index = {info.pid: str(info.local_rank) for info in snap.processes if info.local_rank is not None}
    monkeypatch.setattr(stacks, "frame_arguments", lambda pid, function, file_end: {"i": index[pid]})

    def start(keep_thread_names: bool = True):
        for info in snap.processes:
            info.role, info.rank, info.local_rank = "other", None, None
            if not keep_thread_names:
                info.thread_names = []
        assign_roles({info.pid: info for info in snap.processes})
        return snap

    return start


def frames_of(snap, pid):
    return [f for dump in snap.stacks[pid].dumps for t in dump.threads for f in t.frames]


def test_spawned_ranks_caught_outside_any_collective_are_ranks_by_their_process_group_threads(spawn_snapshot):
    snap = spawn_snapshot()
    children = [p for p in snap.processes if p.thread_names and "pt_gloo_runloop" in p.thread_names]
    assert len(children) == 2
    # the case this covers: no sample of the window shows a torch.distributed frame in either rank
    assert not any("torch/distributed/" in (f.path or f.file or "") for p in children for f in frames_of(snap, p.pid))
    assert {p.role for p in children} == {"dataloader-worker"}  # what the command line (spawn_main) says
    _refine_roles(snap)
    assert sorted((p.role, p.rank) for p in children) == [("rank", 0), ("rank", 1)]
    launcher = snap.process(children[0].ppid)
    assert launcher.role == "launcher"
    assert "distributed" in job_facts([snap])


def test_without_the_thread_names_the_same_stacks_leave_them_workers(spawn_snapshot):
    snap = spawn_snapshot(keep_thread_names=False)
    _refine_roles(snap)
    launcher = snap.processes[0]
    children = [p for p in snap.processes if p.ppid == launcher.pid and p.loads_torch]
    assert len(children) == 2 and {p.role for p in children} == {"dataloader-worker"}, children


def proc(pid, ppid, cmdline, loads_torch, **extra):
    return ProcInfo(pid=pid, ppid=ppid, name="python", cmdline=cmdline, loads_torch=loads_torch, **extra)


def test_a_launch_scripts_sidecar_beside_its_trainer_is_no_rank():
    """run.sh starts a metrics server and a trainer side by side: the one that loads torch trains."""
    script = proc(10, 1, ["bash", "run.sh"], False)
    script.name = "bash"
    sidecar, trainer = proc(11, 10, ["python", "metrics_agg.py"], False), proc(12, 10, ["python", "train.py"], True)
    assign_roles({p.pid: p for p in (script, sidecar, trainer)})
    assert (sidecar.role, trainer.role) == ("other", "rank")
    # a rank that names itself keeps its role, torch or not; so do processes when none loads torch
    ranked = proc(13, 10, ["python", "eval.py"], False, rank=1)
    assign_roles({p.pid: p for p in (script, trainer, ranked)})
    assert (trainer.role, ranked.role) == ("rank", "rank")
    plain = [proc(14, 10, ["python", "a.py"], False), proc(15, 10, ["python", "b.py"], False)]
    assign_roles({p.pid: p for p in (script, *plain)})
    assert [p.role for p in plain] == ["rank", "rank"]
