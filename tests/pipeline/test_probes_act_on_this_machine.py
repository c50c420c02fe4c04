"""A probe runs on the machine where `diagnose` runs: with many nodes it gets only the job's
processes that live here (none, said, when this machine is not a node), and with a live job its
kernel-log findings are judged against that job."""

from __future__ import annotations

import socket
import time

from debug_stuck.core.request import DiagnoseRequest
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.nodes import MergedSnapshot, NodeSnapshot
from debug_stuck.pipeline.gather import Gathered, _fit_to_this_machine
from debug_stuck.probes.collectors.procs import ProcInfo
from debug_stuck.probes.targeted.base import ProbeContext

HERE = socket.gethostname()


def node(host: str, *pids: int) -> NodeSnapshot:
    procs = [
        ProcInfo(pid=pid, ppid=1, name="python", cmdline=["python", "train.py"], create_time=time.time() - 60)
        for pid in pids
    ]
    return NodeSnapshot(host, snapshot=Snapshot(host=host, taken_at=time.time(), window=1.0, processes=procs))


def fitted(nodes, request_pids):
    request = DiagnoseRequest(pids=list(request_pids), hosts=[n.node for n in nodes])
    out = Gathered(nodes=MergedSnapshot("ssh", "hosts", list(nodes), timeout=30.0))
    ctx = ProbeContext(timeout=10.0, pids=list(request_pids))
    _fit_to_this_machine(ctx, request, out)
    return ctx, out


def test_with_many_nodes_a_probe_gets_only_this_machine_s_processes():
    ctx, out = fitted([node("node-b", 100, 101), node(HERE, 200, 201)], [100, 200])
    assert ctx.pids == [200, 201]
    assert ctx.kernel_judge is not None and out.errors == []
    # a kernel line naming a process of the job on another node is not this machine's job
    assert ctx.kernel_judge("oom-kill", "Out of memory: Killed process 100 (python)", None) == (
        False,
        "about pid 100, not a process of the job",
    )
    assert ctx.kernel_judge("oom-kill", "Out of memory: Killed process 201 (python)", None)[0] is True


def test_when_this_machine_is_no_node_a_probe_gets_no_pid_and_the_report_says_so():
    ctx, out = fitted([node("node-b", 100), node("node-c", 300)], [100, 300])
    assert ctx.pids == [] and ctx.kernel_judge is None
    assert out.errors == [
        f"probes run on this machine ({HERE}), which is not one of the job's nodes: they saw none of its processes"
    ]
