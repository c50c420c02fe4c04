"""A deterministic recorded session for the TUI and prompt tests.

The report is the bundled example `nanochat-collective` diagnosed by run_diagnosis (its log
copied with a fixed age, its timestamps and paths frozen), with the processes and stacks
recorded live from the zoo's torchrun straggler (fixtures/tui/straggler-live.json, PIDs
renumbered) and GPU readings from a recorded NVML output (fixtures/gpu). Nothing is read live,
so screenshots are the same on every machine.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Optional

from conftest import diagnosed as run_diagnosis
from conftest import example_request as load_example
from debug_stuck.advice import advise
from debug_stuck.frontends.session.gpu_history import GpuHistory
from debug_stuck.frontends.session.probes import ProbeOffer
from debug_stuck.frontends.session.recorded import RecordedSession
from debug_stuck.live.jobs import JobSummary
from debug_stuck.probes.collectors.gpu.backends import RecordedBackend
from debug_stuck.probes.collectors.gpu.collect import collect_gpus

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLE = "nanochat-collective"
FROZEN_NOW = 1_790_000_000.0  # the recording's "now"
LOG_AGE = 3100.0  # the example log has been silent this long ("51 min")
READINGS = 21  # one GPU reading every 2 s for 40 s


def recorded_report(knowledge, tmp_path: Path):
    request = load_example(knowledge, EXAMPLE)
    request.answers.pop("phase", None)  # left to the log, so it comes back as a suggestion
    log = tmp_path / "train.log"
    shutil.copyfile(request.logs[0], log)
    mtime = time.time() - LOG_AGE
    os.utime(log, (mtime, mtime))
    request.logs = [str(log)]
    report = run_diagnosis(request, knowledge)
    report.created = FROZEN_NOW
    for entry in report.logs:
        entry["path"] = "train.log"
        entry["seconds_since_modified"] = LOG_AGE
    for diagnosis in report.diagnoses:
        for evidence in diagnosis.evidence:
            if evidence.file:
                evidence.file = "train.log"
    live = json.loads((FIXTURES / "tui" / "straggler-live.json").read_text())
    report.processes = live["processes"]
    report.stack_groups = live["stack_groups"]
    report.culprit = {k: v for k, v in live["culprit"].items() if k != "cause"}
    gpus = collect_gpus(backend=RecordedBackend(FIXTURES / "gpu" / "nvml-v100-nccl-spin.json"), samples=1)
    report.gpus = [d.to_dict() for d in gpus.devices if d.index in (0, 1)]
    return advise(report, knowledge)  # as the session does after every diagnosis


def recorded_gpus() -> GpuHistory:
    snapshot = collect_gpus(backend=RecordedBackend(FIXTURES / "gpu" / "nvml-v100-nccl-spin.json"), samples=1)
    history = GpuHistory()
    for i in range(READINGS):
        history.add_snapshot(snapshot, at=FROZEN_NOW - 2.0 * (READINGS - 1 - i))
    return history


RECORDED_JOB = JobSummary(
    pid=4100,
    pids=[4100, 4101, 4102],
    launcher="torchrun",
    ranks=2,
    command="python -m torch.distributed.run --nproc_per_node=2 --master_addr=127.0.0.1 --master_port=29500 "
    "gloo_straggler.py",
    started=FROZEN_NOW - 3 * 3600 - 720,
    gpus=[0, 1],
    log_path="/tmp/zoo/log.txt",
    last_line="step 04118/21400 (19.24%) | loss: 2.980 | lrm: 1.00 | dt: 411.40ms | tok/sec: 1,274,377",
    log_mtime=FROZEN_NOW - LOG_AGE,
    user="trainer",
)

RECORDED_OFFERS = [
    ProbeOffer(
        "nccl-debug-run",
        "rerun your launch command with NCCL debug logging for a bounded time",
        True,
        120.0,
        True,
        "",
        "command",
        "your launch command, e.g. torchrun --nproc_per_node 2 train.py",
    ),
    ProbeOffer(
        "env",
        "audit OMP/MKL threads, TOKENIZERS_PARALLELISM, NCCL_*, TORCH_NCCL_*, HSA_*/MIOPEN_*, /dev/shm, ulimits",
        False,
        10.0,
        True,
        "",
    ),
    ProbeOffer("gpu-health", "GPU health: ECC, Xid, throttling, remapped rows", False, 30.0, True, ""),
]


def recorded_session(knowledge, tmp_path: Path, save_dir: Optional[str] = None) -> RecordedSession:
    return RecordedSession(
        recorded_report(knowledge, tmp_path),
        knowledge,
        jobs=[RECORDED_JOB],
        gpu_history=recorded_gpus(),
        probe_offers=RECORDED_OFFERS,
        save_dir=save_dir or str(tmp_path),
    )
