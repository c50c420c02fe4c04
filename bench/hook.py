"""What debug_stuck.hook costs a running job (issue 16: "near-zero cost while the job runs").

Prints, on this machine:
  1. `import debug_stuck.hook` + `install()` wall time in a fresh interpreter;
  2. the cost of one `debug_stuck.hook.step(n)` call (median of --repeat runs of 200,000 calls);
  3. a training-like loop (a 1 ms step of CPU work, --steps steps) with and without step() each
     step, run in alternating pairs: the median slowdown in percent;
  4. the time for a stack dump through the hook (SIGUSR2 -> faulthandler -> read back).
Targets: step() under 5 us; the 1 ms loop slowed by under 1%; a dump read back in under 0.5 s.

Usage: python bench/hook.py [--repeat 5] [--steps 3000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit


def install_seconds() -> float:
    code = "import time; t=time.perf_counter(); import debug_stuck.hook as h; h.install(); print(time.perf_counter()-t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return float(out.stdout.strip())


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def loop(steps: int, hooked: bool) -> float:
    import debug_stuck.hook as hook

    started = time.perf_counter()
    for n in range(steps):
        busy(0.001)
        if hooked:
            hook.step(n)
    return time.perf_counter() - started


def dump_seconds() -> float:
    from debug_stuck.probes.collectors.hook_dump import dump_by_hook, find_marker

    code = "import debug_stuck.hook as h, threading; h.install(); print('ready', flush=True); threading.Event().wait()"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        proc.stdout.readline()
        marker, why = find_marker(proc.pid)
        if marker is None:
            raise SystemExit(f"no marker: {why}")
        started = time.perf_counter()
        series = dump_by_hook(marker, samples=1)
        if not series.dumps:
            raise SystemExit(f"no dump: {series.error}")
        return time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="debug-stuck-hook-bench-")
    os.environ["DEBUG_STUCK_HOOK_DIR"] = folder
    try:
        return _measure(args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _measure(args) -> int:

    print(f"1. import + install: {statistics.median(install_seconds() for _ in range(args.repeat)) * 1000:.1f} ms")

    import debug_stuck.hook as hook

    hook.install()
    per_call = [timeit.timeit(lambda: hook.step(12345), number=200_000) / 200_000 for _ in range(args.repeat)]
    print(f"2. step(): {statistics.median(per_call) * 1e6:.2f} us per call (target < 5 us)")

    # plain and hooked runs alternate, so drift in the machine's speed falls on both alike
    ratios = []
    for _ in range(args.repeat):
        plain = loop(args.steps, False)
        ratios.append(loop(args.steps, True) / plain)
    print(
        f"3. {args.steps} steps of 1 ms, {args.repeat} alternating pairs: with step() "
        f"{(statistics.median(ratios) - 1) * 100:+.2f}% (median; target < 1%)"
    )
    print(f"4. one stack dump through the hook: {statistics.median(dump_seconds() for _ in range(3)) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
