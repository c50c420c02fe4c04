"""How fast `debug-stuck --version` and `--help` answer (target: well under 0.5 s).

Runs the installed console script several times and prints the median and worst wall time.
Usage: python bench/startup.py [--runs N]
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def time_command(argv, runs):
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), max(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    exe = shutil.which("debug-stuck")
    base = [exe] if exe else [sys.executable, "-m", "debug_stuck"]
    print(f"{'command':40} {'median':>8} {'worst':>8}")
    worst_all = 0.0
    for extra in (["--version"], ["--help"], ["diagnose", "--help"]):
        median, worst = time_command(base + extra, args.runs)
        worst_all = max(worst_all, median)
        print(f"{' '.join(['debug-stuck'] + extra):40} {median * 1000:7.0f}ms {worst * 1000:7.0f}ms")
    print("target: median under 500 ms:", "met" if worst_all < 0.5 else "MISSED")
    return 0 if worst_all < 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
