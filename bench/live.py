"""Time to a verdict on live jobs, and how it grows with the number of processes.

Prints, on this machine:
  1. one hung process (the `future_result` zoo job): `debug-stuck diagnose --pid P` wall time;
  2. a job of 2 ranks x 4 DataLoader workers (the `ddp_workers` zoo job, needs torch), and one of
     8 gloo ranks x 8 workers + the launcher (73 processes), each diagnosed with its wait chains;
  3. 1, 2, 4, 8, 16 and 32 hung processes in one diagnosis, side by side with running
     `py-spy dump` serially over the same processes (one sample each; debug-stuck takes two).
Targets (2-core machine): (1) < 3 s including the sampling window, (2) < 5 s each, (3) 32 processes
cost less than 2x what 8 do.

Usage: python bench/live.py [--repeat N] [--max-procs 32]
Every job it starts is stopped by process group and PID when it ends (even on Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from debug_stuck.zoo import spawn


def diagnose_seconds(pids, repeat: int, chains: bool = False):
    """Median wall time of `debug-stuck diagnose` over `repeat` runs; with chains, also the verdict's
    chain of the last run in a few words (that the chains were built, not just the stacks)."""
    argv = [sys.executable, "-m", "debug_stuck", "diagnose", "--format", "json"]
    for pid in pids:
        argv += ["--pid", str(pid)]
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        samples.append(time.perf_counter() - started)
        if proc.returncode != 0:
            raise SystemExit(f"diagnose failed: {proc.stderr.strip()}")
    if not chains:
        return statistics.median(samples)
    import json

    chain = json.loads(proc.stdout).get("chain") or []
    words = " -> ".join(f"{hop['role']} {hop['pid']} ({hop['waits_on']['kind']})" for hop in chain)
    return statistics.median(samples), words or "none"


def serial_py_spy_seconds(pids) -> float:
    from debug_stuck.probes.collectors.stacks import _find_py_spy

    exe = _find_py_spy() or shutil.which("py-spy")
    started = time.perf_counter()
    for pid in pids:
        subprocess.run([exe, "dump", "--pid", str(pid)], capture_output=True, timeout=60)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description="debug-stuck live collection benchmark")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-procs", type=int, default=32)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="debug-stuck-bench-"))
    jobs = []
    try:
        job = spawn.start("future_result", root, on_spawn=jobs.append)
        one = diagnose_seconds([job.proc.pid], args.repeat)
        print(f"one hung process:                 {one:6.2f} s   (target < 3 s)")
        if importlib.util.find_spec("torch"):
            ddp = spawn.start("ddp_workers", root, ready_timeout=120, on_spawn=jobs.append)
            n = len(ddp.pids())
            t = diagnose_seconds([ddp.proc.pid], args.repeat)
            print(f"2 ranks x 4 workers ({n} processes): {t:6.2f} s   (target < 5 s)")
            ddp.stop()
            big = spawn.start(
                "ddp_workers", root, ready_timeout=300, nproc_per_node=8, args=["--workers", "8"], on_spawn=jobs.append
            )
            n = len(big.pids())
            t, chained = diagnose_seconds([big.proc.pid], args.repeat, chains=True)
            print(f"8 ranks x 8 workers ({n} processes): {t:6.2f} s   (target < 5 s; chain: {chained})")
            big.stop()
        else:
            print("2 ranks x 4 workers: skipped (torch is not installed)")
        job.stop()
        print(f"\n{'processes':>9} {'debug-stuck':>12} {'py-spy serial (1 sample)':>26}")
        times = {}
        sizes = [n for n in (1, 2, 4, 8, 16, 32) if n <= args.max_procs]
        for n in sizes:
            batch = [spawn.start("future_result", root, on_spawn=jobs.append) for _ in range(n)]
            pids = [j.proc.pid for j in batch]
            times[n] = diagnose_seconds(pids, args.repeat)
            serial = serial_py_spy_seconds(pids)
            print(f"{n:>9} {times[n]:>11.2f}s {serial:>25.2f}s")
            for j in batch:
                j.stop()
        if 8 in times and 32 in times:
            ratio = times[32] / times[8]
            print(f"\n32 vs 8 processes: x{ratio:.2f} (target < 2)")
    finally:
        for job in jobs:
            job.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
