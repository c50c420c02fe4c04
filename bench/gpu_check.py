"""Real CUDA hangs, diagnosed live, with everything recorded as future test fixtures.

On a machine with an NVIDIA GPU and torch built with CUDA, this starts two hung jobs, one at a
time:
  cuda_sync   the main thread in cudaStreamSynchronize (torch.cuda.current_stream().synchronize())
              behind minutes of torch.cuda._sleep kernels: the GPU is busy, the host waits;
  dataloader  a model on the GPU whose DataLoader workers never deliver a batch: the main thread
              waits for the workers, the GPU idles.
For each it saves under OUT/<name>/: report.json (`debug-stuck diagnose --pid P --format json`),
nvml.json (the tool's own GPU collector), py-spy.txt and py-spy-native.txt (`py-spy dump`),
pystack.txt (`pystack remote`), log.txt (the job's output), and OUT/summary.json. Every step is
bounded; the whole run ends within 8 minutes; every process it started is killed by process group
and PID at the end, Ctrl-C included. Elsewhere it prints "no NVIDIA GPU here: ..." and exits 0.

Usage: python bench/gpu_check.py OUT_DIR
Exit: 0 all recorded, or no GPU here; 1 a step failed (see summary.json); 2 bad usage.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

TOTAL_SECONDS = 8 * 60
CLEANUP_RESERVE = 30.0  # kept back for stopping the jobs
READY_SECONDS = 120.0  # CUDA init, calibration and queueing the kernels
DIAGNOSE_SECONDS = 150.0
TOOL_SECONDS = 60.0
QUEUED_GPU_SECONDS = 420.0  # longer than this run: the host is still waiting when it is killed
SCENARIOS = ("cuda_sync", "dataloader")


# --- the hung jobs (run as `gpu_check.py --child NAME`) -----------------------------------------


def _ready(note: dict) -> None:
    path = Path(os.environ["ZOO_WORKDIR"]) / "READY"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(note))
    tmp.replace(path)


def child_cuda_sync() -> None:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(100_000_000)
    end.record()
    end.synchronize()
    cycles_per_s = 100_000_000 / (start.elapsed_time(end) / 1000.0)
    one = int(cycles_per_s)  # about a second a kernel
    for _ in range(int(QUEUED_GPU_SECONDS)):
        torch.cuda._sleep(one)
    _ready({"cycles_per_s": cycles_per_s, "kernels": int(QUEUED_GPU_SECONDS)})
    torch.cuda.current_stream().synchronize()  # the hang: cudaStreamSynchronize for minutes


class _NeverDataset:
    def __len__(self) -> int:
        return 1000

    def __getitem__(self, index: int):
        time.sleep(10**6)  # a worker stuck on its sample: no batch ever comes


def child_dataloader() -> None:
    import torch

    model = torch.nn.Linear(64, 64).cuda()
    model(torch.randn(8, 64, device="cuda")).sum().backward()
    torch.cuda.synchronize()
    loader = torch.utils.data.DataLoader(_NeverDataset(), batch_size=4, num_workers=2)
    batches = iter(loader)
    _ready({"workers": 2})
    next(batches)  # the hang: the main thread waits for a batch, the GPU idles


# --- the check ----------------------------------------------------------------------------------


def no_gpu_reason() -> str | None:
    """Why this machine cannot run the check, or None when it can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    from debug_stuck.probes.collectors.gpu.collect import collect_gpus

    snapshot = collect_gpus(timeout=10)
    if snapshot.vendor != "nvidia" or not snapshot.available:
        return f"NVML finds no NVIDIA GPU ({snapshot.note or '; '.join(snapshot.errors) or 'no devices'})"
    return None


class Budget:
    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self, want: float) -> float:
        """At most `want` seconds, and never into the time kept for cleanup; 0 when none is left."""
        return max(0.0, min(want, self.deadline - CLEANUP_RESERVE - time.monotonic()))


def run_tool(argv: list, seconds: float, out: Path) -> dict:
    """Run argv bounded (its own process group, killed whole at the bound), save its output."""
    from debug_stuck.bounded import run_command

    if seconds <= 0:
        out.write_text("skipped: the 8-minute budget was spent\n")
        return {"argv": argv, "skipped": True}
    started = time.monotonic()
    try:
        result = run_command(argv, timeout=seconds)
    except OSError as exc:
        out.write_text(f"could not start {argv[0]}: {exc}\n")
        return {"argv": argv, "error": str(exc)}
    out.write_text(result.stdout + ("\n--- stderr ---\n" + result.stderr if result.stderr else ""))
    return {
        "argv": argv,
        "returncode": result.returncode,
        "timed_out": result.timed_out,
        "seconds": round(time.monotonic() - started, 2),
    }


def record(name: str, root: Path, out: Path, budget: Budget, jobs: list) -> dict:
    from debug_stuck.probes.collectors.gpu.collect import collect_gpus
    from debug_stuck.zoo import spawn

    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    wait = budget.left(READY_SECONDS)
    if wait <= 0:
        return {"skipped": "the 8-minute budget was spent"}
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", name]
    try:
        job = spawn.start(f"gpu-{name}", root, ready_timeout=wait, argv=argv, wait_ready=True, on_spawn=jobs.append)
    except spawn.ZooStartError as exc:
        (folder / "start-error.txt").write_text(str(exc))
        return {"error": f"the job did not reach its hang: {str(exc).splitlines()[0]}"}
    pid = job.proc.pid
    steps = {"pid": pid, "ready": job.info}
    nvml = collect_gpus(timeout=max(1.0, budget.left(15)), samples=3, interval=0.5)
    (folder / "nvml.json").write_text(json.dumps(nvml.to_dict(), indent=1))
    steps["nvml"] = [d.fact_line() for d in nvml.devices]
    diagnose = [sys.executable, "-m", "debug_stuck", "diagnose", "--pid", str(pid), "--format", "json"]
    steps["diagnose"] = run_tool(diagnose, budget.left(DIAGNOSE_SECONDS), folder / "report.json")
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    steps["py-spy"] = run_tool([py_spy, "dump", "--pid", str(pid)], budget.left(TOOL_SECONDS), folder / "py-spy.txt")
    native = [py_spy, "dump", "--native", "--pid", str(pid)]
    steps["py-spy-native"] = run_tool(native, budget.left(TOOL_SECONDS), folder / "py-spy-native.txt")
    pystack = [sys.executable, "-m", "pystack", "remote", str(pid), "--native"]
    steps["pystack"] = run_tool(pystack, budget.left(TOOL_SECONDS), folder / "pystack.txt")
    job.stop()
    shutil.copyfile(job.log, folder / "log.txt")
    return steps


def main(argv: list) -> int:
    if len(argv) == 3 and argv[1] == "--child" and argv[2] in SCENARIOS:
        globals()[f"child_{argv[2]}"]()
        return 0
    if len(argv) != 2 or argv[1].startswith("-"):
        print("usage: python bench/gpu_check.py OUT_DIR (a folder for the recordings)", file=sys.stderr)
        return 2
    reason = no_gpu_reason()
    if reason:
        print(f"no NVIDIA GPU here: {reason}; nothing to check")
        return 0
    import tempfile

    out = Path(argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(TOTAL_SECONDS)
    root = Path(tempfile.mkdtemp(prefix="debug-stuck-gpu-check-"))
    jobs: list = []
    summary: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        import torch

        summary["torch"] = torch.__version__
        summary["cuda"] = torch.version.cuda
        summary["gpu"] = torch.cuda.get_device_name(0)
        for name in SCENARIOS:
            summary[name] = record(name, root, out, budget, jobs)
    finally:
        for job in jobs:
            try:
                job.stop()
            except RuntimeError as exc:  # a process survived SIGKILL (D state): say so
                summary.setdefault("leftovers", []).append(str(exc))
        shutil.rmtree(root, ignore_errors=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
    failed = [n for n in SCENARIOS if "error" in summary.get(n, {}) or summary.get(n, {}).get("skipped")]
    failed += [n for n in SCENARIOS if summary.get(n, {}).get("diagnose", {}).get("returncode") not in (0, None)]
    print(f"recorded under {out}: {', '.join(SCENARIOS)}" + (f"; problems: {', '.join(failed)}" if failed else ""))
    return 1 if failed or summary.get("leftovers") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
