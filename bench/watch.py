"""How fast `debug-stuck watch` notices a hang, whether it cries wolf, and what watching costs.

Three measurements, all with the default settings (floor 10 s, 8 x the median step interval,
poll 1 s) and real processes:

1. detection latency: a job that steps every 1 s hangs at step N; latency is the time from its
   last log write (the last step line) to the watcher's ``stall`` event, and to its ``report``
   event (the diagnosis written). Target: stall under 15 s.
2. false alarms: two healthy jobs watched for ``--minutes`` (default 10): one with irregular step
   times (0.4 to 1.6 s) and a slow 3.5 s checkpoint every 30 steps, and the zoo's ``healthy``
   job (torch, DataLoader workers, torch.save every 20 steps; skipped without torch). Target: no
   ``stall`` event.
3. the watcher's own cost during (2), read with psutil every second: CPU as % of one core over
   the run (the watcher process alone, and with the short-lived py-spy helpers it started), and
   peak RSS. Targets: under 2% of a core, under 100 MB.

    python bench/watch.py                 # 10 minutes of healthy watching + 3 hang trials
    python bench/watch.py --minutes 3 --trials 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
TARGETS = REPO / "tests" / "targets"
ZOO = REPO / "assistant" / "zoo"

LATENCY_TARGET = 15.0
CPU_TARGET = 2.0
RSS_TARGET_MB = 100.0


def _watch_command(args, report_dir: Path) -> list:
    return [
        sys.executable,
        "-m",
        "debug_stuck",
        "watch",
        "--format",
        "json",
        "--quiet",
        "--report-dir",
        str(report_dir),
        *args,
    ]


class WatchRun:
    """A watcher subprocess whose JSON events are read as they come (with their arrival time)."""

    def __init__(self, watch_args: list, command: list, workdir: Path, env_extra: dict | None = None):
        env = dict(os.environ)
        env["DEBUG_STUCK_STATE_DIR"] = str(workdir / "state")
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        env.update(env_extra or {})
        self.workdir = workdir
        self.proc = subprocess.Popen(
            _watch_command(watch_args, workdir / "reports") + ["--", *command],
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.events: list = []
        self.job_pgids: set = set()
        self.on_event = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            event["_seen"] = time.time()
            if event.get("event") in ("started", "restarted"):
                self.job_pgids.add(event["pid"])
            if self.on_event is not None:
                self.on_event(event)
            self.events.append(event)

    def wait_for(self, kind: str, timeout: float):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events:
                if event.get("event") == kind:
                    return event
            if self.proc.poll() is not None and not self._reader.is_alive():
                return None
            time.sleep(0.05)
        return None

    def kinds(self) -> list:
        return [e.get("event") for e in self.events]

    def stop(self) -> None:
        """Kill the watcher and every job it launched (by process group: each job has its own session)."""
        for pgid in [self.proc.pid, *self.job_pgids]:
            try:
                os.killpg(pgid, 9)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def detection_latency(trials: int, workdir: Path) -> dict:
    results = []
    for trial in range(trials):
        wd = workdir / f"hang-{trial}"
        wd.mkdir(parents=True)
        hang_at = 12 + trial
        job = [sys.executable, str(TARGETS / "watch_hang.py"), "--interval", "1", "--hang-at", str(hang_at)]
        job += ["--steps", "1000", "--always"]
        run = WatchRun(["--on-hang", "stop", "--grace", "2"], job, wd)
        marks: dict = {}

        def on_event(event, marks=marks, run=run):
            if event.get("event") == "stall" and "log_mtime" not in marks:
                started = next(e for e in run.events if e.get("event") == "started")
                marks["log_mtime"] = os.stat(started["log"]).st_mtime

        run.on_event = on_event
        meter = CostMeter(run.proc.pid)
        sampling = threading.Event()

        def sample_rss(meter=meter, sampling=sampling):
            while not sampling.wait(0.2):
                meter.sample()

        threading.Thread(target=sample_rss, daemon=True).start()
        try:
            stall = run.wait_for("stall", timeout=hang_at + 60)
            report = run.wait_for("report", timeout=120)
            run.proc.wait(timeout=60)
        finally:
            sampling.set()
            run.stop()
        if stall is None or "log_mtime" not in marks:
            results.append({"trial": trial, "error": f"no stall event; events: {run.kinds()}"})
            continue
        last_step_at = marks["log_mtime"]
        entry = {
            "trial": trial,
            "hang_at": hang_at,
            "last_step": stall.get("last_step"),
            "threshold": stall.get("threshold"),
            "stall_latency_s": round(stall["_seen"] - last_step_at, 2),
            "report_latency_s": round(report["_seen"] - last_step_at, 2) if report else None,
            "rss_peak_mb_with_report": round(meter.rss_peak / 2**20, 1),
        }
        results.append(entry)
        print(
            f"  trial {trial}: hang after step {entry['last_step']}: stall event after "
            f"{entry['stall_latency_s']:.1f} s (threshold {entry['threshold']} s), report after "
            f"{entry['report_latency_s']} s; watcher peak RSS with the diagnosis {entry['rss_peak_mb_with_report']} MB",
            flush=True,
        )
    good = [r["stall_latency_s"] for r in results if "stall_latency_s" in r]
    return {
        "trials": results,
        "stall_latency_median_s": round(statistics.median(good), 2) if good else None,
        "stall_latency_max_s": max(good) if good else None,
        "target_s": LATENCY_TARGET,
        "ok": bool(good) and len(good) == len(results) and max(good) < LATENCY_TARGET,
    }


class CostMeter:
    """CPU and RSS of one watcher process, sampled every second."""

    def __init__(self, pid: int):
        self.proc = psutil.Process(pid)
        self.rss_peak = 0
        self.samples = 0
        self.first = self._times()
        self.started = time.monotonic()
        self.last = self.first

    def _times(self):
        t = self.proc.cpu_times()
        return (t.user + t.system, t.user + t.system + t.children_user + t.children_system)

    def sample(self) -> None:
        try:
            self.last = self._times()
            self.rss_peak = max(self.rss_peak, self.proc.memory_info().rss)
            self.samples += 1
        except psutil.Error:
            pass

    def result(self) -> dict:
        wall = max(1e-6, time.monotonic() - self.started)
        own = 100.0 * (self.last[0] - self.first[0]) / wall
        helpers = 100.0 * (self.last[1] - self.first[1]) / wall
        return {
            "cpu_percent_of_a_core": round(own, 2),
            "cpu_percent_with_helpers": round(helpers, 2),
            "rss_peak_mb": round(self.rss_peak / 2**20, 1),
            "seconds": round(wall, 1),
        }


def false_alarms(minutes: float, workdir: Path) -> dict:
    jobs = {
        "irregular+checkpoint": [
            sys.executable,
            str(TARGETS / "watch_irregular.py"),
            "--steps",
            "100000",
            "--interval",
            "1",
            "--checkpoint-every",
            "30",
            "--save-factor",
            "3.5",
        ],
    }
    try:
        import torch  # noqa: F401

        jobs["zoo healthy (torch, 2 workers)"] = [sys.executable, str(ZOO / "healthy.py")]
    except ImportError:
        print("  (torch not installed: the zoo's healthy job is skipped)")
    runs = {}
    for name, command in jobs.items():
        wd = workdir / name.split()[0].replace("+", "-")
        wd.mkdir(parents=True)
        runs[name] = WatchRun(["--progress-every", "10"], command, wd, {"ZOO_WORKDIR": str(wd / "zoo")})
    meters = {}
    deadline = time.monotonic() + minutes * 60
    try:
        time.sleep(3.0)  # past the watcher's own start-up (imports, knowledge base): the steady state
        meters = {name: CostMeter(run.proc.pid) for name, run in runs.items()}
        while time.monotonic() < deadline:
            for meter in meters.values():
                meter.sample()
            if any(run.proc.poll() is not None for run in runs.values()):
                break
            time.sleep(1.0)
    finally:
        for run in runs.values():
            run.stop()
    out = {}
    for name, run in runs.items():
        stalls = [e for e in run.events if e.get("event") == "stall"]
        steps = [e.get("step") for e in run.events if e.get("event") == "progress" and e.get("step") is not None]
        phases = [e for e in run.events if e.get("event") == "phase"]
        entry = {
            "minutes": minutes,
            "stall_events": len(stalls),
            "stalls": stalls,
            "phases_recognised": len(phases),
            "last_step": steps[-1] if steps else None,
            "watcher_exited_early": run.proc.returncode not in (None, -9),
        }
        entry.update(meters[name].result() if name in meters else {})
        out[name] = entry
        print(
            f"  {name}: {entry['stall_events']} stall event(s) in {minutes:g} min (last step {entry['last_step']}); "
            f"watcher CPU {entry.get('cpu_percent_of_a_core')}% of a core "
            f"({entry.get('cpu_percent_with_helpers')}% with py-spy helpers), peak RSS {entry.get('rss_peak_mb')} MB",
            flush=True,
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--minutes", type=float, default=10.0, help="healthy watching time (default 10; 0: latency trials only)"
    )
    parser.add_argument("--trials", type=int, default=3, help="hang detection trials (default 3)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-watch-"))
    results: dict = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    try:
        print(f"detection latency ({args.trials} trials, a job stepping every 1 s, default settings):", flush=True)
        results["latency"] = detection_latency(args.trials, workdir)
        if args.minutes > 0:
            print(f"false alarms and watcher cost ({args.minutes:g} min of healthy jobs):", flush=True)
            results["healthy"] = false_alarms(args.minutes, workdir)
        else:
            results["healthy"] = {}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    healthy = list(results["healthy"].values())
    verdicts = {"latency under 15 s": results["latency"]["ok"]}
    if healthy:  # measured only with --minutes > 0
        verdicts["no false alarm"] = all(h["stall_events"] == 0 for h in healthy)
        verdicts["CPU under 2% of a core"] = all((h.get("cpu_percent_of_a_core") or 0) < CPU_TARGET for h in healthy)
        verdicts["RSS under 100 MB"] = all((h.get("rss_peak_mb") or 0) < RSS_TARGET_MB for h in healthy)
    results["verdicts"] = verdicts
    for what, ok in verdicts.items():
        print(f"{'PASS' if ok else 'FAIL'}  {what}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str) + "\n")
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
