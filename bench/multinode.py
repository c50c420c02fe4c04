"""Merge and classify a 1,024-rank job on 128 nodes, from snapshots built out of a real one.

1. Takes a real snapshot of the `gloo_straggler` zoo job (torchrun, 4 ranks, gloo; rank 1 stalls
   in __getitem__ while the others wait in all_reduce), in its wire form (what `debug-stuck
   snapshot --format json` prints).
2. Replicates it into NODES wire snapshots of RANKS_PER_NODE ranks each (a launcher and its
   ranks per node, new PIDs, host names, RANK/LOCAL_RANK/SLURM_NODEID), every rank in the waiting
   stack except one, which gets the straggler's stack: rank 62 on node-007 by default.
3. Times what `diagnose --slurm-job` does once the lines are in: parse every node's JSON line,
   rebuild the snapshots, merge, classify. Peak memory is measured in a separate run
   (tracemalloc slows Python down), and as the growth of the process's max RSS.

Targets: merge + classify < 2 s, memory < 500 MB.

With --real (root, torch): also stands up the test Slurm of tests/multinode_engines.py, submits
the straggler with sbatch, and reports the wall time of the real `--slurm-job` diagnosis
(collect over srun + merge + classify), median of --repeat runs; every daemon and job process is
stopped by PID at the end.

Usage: python bench/multinode.py [--nodes 128] [--ranks-per-node 8] [--repeat 5] [--real]
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from debug_stuck.kb import load_knowledge  # noqa: E402
from debug_stuck.live.nodes import MergedSnapshot, node_from_wire  # noqa: E402
from debug_stuck.live.slurm import collect_slurm  # noqa: E402
from debug_stuck.live.snapshot import take_snapshot  # noqa: E402
from debug_stuck.pipeline.judge import judge_nodes  # noqa: E402


def real_template(root: Path, attempts: int = 3) -> dict:
    """A wire snapshot of a live gloo_straggler job with 4 ranks (stopped afterwards), with the
    stacks of every rank (a dump that timed out on a loaded machine is taken again)."""
    from debug_stuck.zoo import spawn

    with spawn.running("gloo_straggler", root, nproc_per_node=4, ready_timeout=180) as job:
        time.sleep(1.0)  # READY covers rank 0; give ranks 2 and 3 the moment to join the all_reduce
        for _ in range(attempts):
            wire = take_snapshot(pids=[job.proc.pid], window=1.0, native=True)
            if all(s["dumps"] for s in wire["series"]):
                return wire
        missing = [s["pid"] for s in wire["series"] if not s["dumps"]]
        raise SystemExit(f"no stacks for processes {missing} after {attempts} snapshots: {wire['errors'][:2]}")


def _series_for(template: dict, pid: int, new_pid: int) -> dict:
    series = copy.deepcopy(next(s for s in template["series"] if s["pid"] == pid))
    series["pid"] = new_pid
    for dump in series["dumps"]:
        for thread in dump["threads"]:
            if thread[0] == pid:
                thread[0] = new_pid  # the main thread's tid is the pid
            else:
                thread[0] = thread[0] - pid + new_pid
    return series


def synthesize(template: dict, nodes: int, per_node: int, odd_rank: int) -> List[str]:
    """One JSON line per node, as srun would hand them over."""
    procs = template["processes"]
    launcher = next(p for p in procs if p.get("role") == "launcher")
    ranks = {p.get("rank"): p for p in procs if p.get("role") == "rank"}
    waiting, straggler = ranks[0], ranks[1]
    world = nodes * per_node
    lines = []
    for n in range(nodes):
        wire = {k: v for k, v in template.items() if k not in ("processes", "series")}
        name = f"node-{n:03d}"
        wire.update(host=name, node=name, node_id=str(n))
        base = 10_000 + 37 * n  # PIDs overlap across nodes, as they do on a real cluster
        lpid = base
        lproc = copy.deepcopy(launcher)
        lproc.update(pid=lpid, ppid=1, children=[lpid + 1 + i for i in range(per_node)])
        lproc.setdefault("env", {})["SLURM_NODEID"] = str(n)
        processes, series = [lproc], [_series_for(template, launcher["pid"], lpid)]
        for local in range(per_node):
            rank = n * per_node + local
            model = straggler if rank == odd_rank else waiting
            pid = lpid + 1 + local
            proc = copy.deepcopy(model)
            proc.update(pid=pid, ppid=lpid, rank=rank, local_rank=local, world_size=world)
            env = proc.setdefault("env", {})
            env.update(RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(world), SLURM_NODEID=str(n))
            processes.append(proc)
            series.append(_series_for(template, model["pid"], pid))
        wire["processes"] = processes
        wire["series"] = series
        lines.append(json.dumps(wire, separators=(",", ":")))
    return lines


def merge_and_classify(lines: List[str], knowledge, timeout: float = 30.0):
    nodes = [node_from_wire(json.loads(line)) for line in lines]
    merged = MergedSnapshot("synthetic", f"synthetic job of {len(lines)} nodes", nodes, timeout)
    return judge_nodes(knowledge, merged)


def real_slurm(repeat: int, root: Path) -> None:
    import os

    from multinode_engines import EngineUnavailable, SlurmCluster, submit_straggler

    knowledge = load_knowledge()
    cluster = SlurmCluster(root / "slurm")
    try:
        cluster.start()
    except EngineUnavailable as exc:
        cluster.stop()
        print(f"real --slurm-job diagnosis: skipped ({exc})")
        return
    os.environ["SLURM_CONF"] = str(cluster.conf)
    job = None
    try:
        job = submit_straggler(cluster, root / "job", nproc=4)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            merged = collect_slurm(job.jobid, timeout=30)
            report = judge_nodes(knowledge, merged)
            times.append(time.perf_counter() - started)
            assert report.culprit and report.culprit["rank"] == 1, report.culprit
        collect_only = merged.seconds
        print(
            f"real --slurm-job diagnosis (test cluster, 1 node, 4 ranks): median {statistics.median(times):.2f} s "
            f"(min {min(times):.2f}, max {max(times):.2f}, {repeat} runs; srun step alone {collect_only:.2f} s)"
        )
    finally:
        if job is not None:
            left = job.cancel()
            if left:
                print(f"warning: job processes left after scancel: {left}")
        cluster.stop()
        os.environ.pop("SLURM_CONF", None)


def main() -> int:
    parser = argparse.ArgumentParser(description="debug-stuck multi-node merge/classify benchmark")
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--ranks-per-node", type=int, default=8)
    parser.add_argument("--odd-rank", type=int, default=62)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--real", action="store_true", help="also time a real --slurm-job diagnosis (root)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="debug-stuck-bench-mn-"))
    knowledge = load_knowledge()

    started = time.perf_counter()
    template = real_template(root)
    print(f"real snapshot of gloo_straggler (4 ranks): {time.perf_counter() - started:.1f} s to take")
    lines = synthesize(template, args.nodes, args.ranks_per_node, args.odd_rank)
    size = sum(len(line) for line in lines)
    ranks = args.nodes * args.ranks_per_node
    print(
        f"synthetic job: {args.nodes} nodes x {args.ranks_per_node} ranks = {ranks} ranks; "
        f"{size / 1e6:.1f} MB of JSON on the wire ({size / args.nodes / 1e3:.1f} kB per node)"
    )

    report = merge_and_classify(lines, knowledge)  # warm-up (imports, regex caches)
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        report = merge_and_classify(lines, knowledge)
        times.append(time.perf_counter() - started)
    print(
        f"merge + classify: median {statistics.median(times):.3f} s, max {max(times):.3f} s "
        f"over {args.repeat} runs   (target < 2 s)"
    )
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    merge_and_classify(lines, knowledge)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    rss_total = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"peak memory of one merge + classify: {peak / 2**20:.0f} MB (tracemalloc); max RSS grew "
        f"{rss_growth / 1024:.0f} MB beyond the earlier runs; whole process max RSS {rss_total / 1024:.0f} MB "
        f"(interpreter and knowledge base included)   (target < 500 MB)"
    )
    culprit = report.culprit or {}
    print(f"culprit: rank {culprit.get('rank')} on {culprit.get('host')}; groups: {report.notes[0].split('; ', 1)[-1]}")
    ok = statistics.median(times) < 2.0 and peak < 500 * 2**20 and culprit.get("rank") == args.odd_rank
    if args.real:
        real_slurm(max(1, min(args.repeat, 5)), root)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
