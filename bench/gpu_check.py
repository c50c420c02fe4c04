"""Real CUDA hangs, diagnosed live, with everything recorded as future test fixtures.

On a machine with an NVIDIA GPU and torch built with CUDA, this starts these jobs, one at a
time:
  cuda_sync   the main thread in cudaStreamSynchronize (torch.cuda.current_stream().synchronize())
              behind minutes of torch.cuda._sleep kernels: the GPU is busy, the host waits;
  sync_in_library  the same wait reached inside a library: clip_grad_norm_(error_if_nonfinite=True)
              behind minutes of GPU work; on the H200 the host blocked before the norm's read-back, in
              torch._foreach_norm's cuLaunchKernel (the launch queue full): the innermost Python frame is
              torch's, the host spins in CUDA's wait: hung, not a library computing;
  empty_cache_wait  torch.cuda.empty_cache() behind minutes of GPU work (seven-second kernels, fewer than
              the launch queue holds), a cached block to give back: cudaFree waits for the device;
  pin_wait    a pinned host buffer asked for (torch.empty(..., pin_memory=True)) behind the same GPU work,
              then torch.cuda.synchronize(): where the host waits says whether pinning waits for the GPU;
  launch_bound  a loop of in-place multiplies on a 2 GiB tensor with a silent log: the GPU is the
              bottleneck, the launch queue stays full and the host waits in cuLaunchKernel on one line of
              its own code: healthy;
  launch_bound_small  the same on a 16 MiB tensor (kernels of a few microseconds): healthy;
  launch_bound_tiny  the same on a 64 KiB tensor (the GPU keeps up; the host is the bottleneck): healthy;
  lstm_long   an LSTM's forward (torch's own, cuDNN off: cuDNN refuses so long a sequence) over
              100,000 steps, again and again, silent: one library call launches small kernels for
              seconds: healthy;
  dataloader  a model on the GPU whose DataLoader workers never deliver a batch: the main thread
              waits for the workers, the GPU idles;
  dataloader_pinned  the same with pin_memory=True: the main thread waits on the pin-memory thread's
              queue, that thread on the workers;
  nccl_fr     a one-rank NCCL process group with its Flight Recorder on: a few collectives
              complete, then an all_reduce is queued behind minutes of GPU work and the host
              waits in torch.cuda.synchronize(); the job writes its own Flight Recorder dump
              (pickle and JSON) where TORCH_FR_DUMP_TEMP_FILE points, as NCCL does at a timeout;
  healthy_gpu a real training loop on the GPU (AdamW, bf16 autocast) that logs a step line about
              twice a second: the host waits in loss.item() most of the time, and the job is healthy;
  quiet_gpu   the same loop logging nothing after its first line: GPU busy, log silent, stacks moving;
              healthy too (the user's "GPU 100%, no log" job that is in fact training);
  jax_init    process 0 of a two-process jax.distributed job, in jax.distributed.initialize(), whose
              process 1 never starts (JAX on its CPU platform: the wait is the coordination service's).
  nccl_late_rank  torchrun, two NCCL ranks on the one GPU: rank 1 blocks opening a FIFO shard that no one
              writes, before its first collective; rank 0 waits in its first all_reduce (NCCL's
              communicator set-up, which needs every rank): the culprit is rank 1;
  eval_while_waiting  torchrun, two gloo ranks on the one GPU: rank 0 runs a long silent evaluation on
              the GPU, rank 1 waits for it in dist.barrier(): healthy, never to be called hung;
  compile_autotune  torch.compile(mode="max-autotune-no-cudagraphs") at its first step: Dynamo,
              Inductor and Triton autotuning (compile workers as child processes) with a silent log:
              slow, not hung;
  input_bound a model on the GPU fed by two DataLoader workers that each spend 30 s of CPU on a
              sample: the main thread waits for a batch, the GPU idles, the log is silent: slow, not hung;
  save_while_waiting  torchrun, two gloo ranks: rank 0 saves 2 GiB of GPU tensors with torch.save, again
              and again, rank 1 waits for it in dist.barrier(): healthy;
  stopped_rank  torchrun, two gloo ranks with CUDA tensors: after one all_reduce rank 1 stops itself
              (SIGSTOP), rank 0 waits in the next all_reduce: hung, the culprit rank 1;
  lightning_val  a Lightning Trainer on the GPU in a long validation loop with a silent log (no
              progress bar, no logger): healthy;
  hf_eval     the Hugging Face Trainer's evaluate() of a BERT-large-sized model (from its config, no
              download) on the GPU, bf16, two DataLoader workers, a silent log: healthy.
For each it saves under OUT/<name>/: report.json (`debug-stuck diagnose --pid P --format json`),
nvml.json (the tool's own GPU collector), nvml-raw.json (the raw NVML values, in the shape
tests/fixtures/gpu replays), py-spy.txt and py-spy-native.txt (`py-spy dump`), pystack.txt
(`pystack remote`), log.txt (the job's output), the Flight Recorder dumps (nccl_fr), and
OUT/summary.json. Every step is
bounded; the whole run ends within 8 minutes; every process it started is killed by process group
and PID at the end, Ctrl-C included. Elsewhere it prints "no NVIDIA GPU here: ..." and exits 0.

Usage: python bench/gpu_check.py OUT_DIR [--seconds N] [--only NAME,...]
       (N: the whole run's bound, default 540; NAME: the jobs to run, default all)
Exit: 0 all recorded, or no GPU here; 1 a step failed (see summary.json); 2 bad usage.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

TOTAL_SECONDS = 9 * 60
CLEANUP_RESERVE = 30.0  # kept back for stopping the jobs
READY_SECONDS = 120.0  # CUDA init, calibration and queueing the kernels
DIAGNOSE_SECONDS = 150.0
TOOL_SECONDS = 60.0
DECODE_SECONDS = 30.0  # input_bound: the CPU time of one sample
QUEUED_GPU_SECONDS = 420.0  # longer than this run: the host is still waiting when it is killed
SCENARIOS = (
    "healthy_gpu",
    "quiet_gpu",
    "jax_init",
    "cuda_sync",
    "sync_in_library",
    "empty_cache_wait",
    "pin_wait",
    "launch_bound",
    "launch_bound_small",
    "launch_bound_tiny",
    "lstm_long",
    "dataloader",
    "dataloader_pinned",
    "nccl_fr",
    "nccl_late_rank",
    "eval_while_waiting",
    "compile_autotune",
    "input_bound",
    "save_while_waiting",
    "stopped_rank",
    "lightning_val",
    "hf_eval",
)
HEALTHY = (
    "launch_bound",
    "launch_bound_small",
    "launch_bound_tiny",
    "lstm_long",
    "healthy_gpu",
    "quiet_gpu",
    "eval_while_waiting",
    "compile_autotune",
    "input_bound",
    "save_while_waiting",
    "lightning_val",
    "hf_eval",
)
TORCHRUN = ("nccl_late_rank", "eval_while_waiting", "save_while_waiting", "stopped_rank")  # two ranks, one GPU
FR_PREFIX = "nccl_trace_rank_"


# --- the hung jobs (run as `gpu_check.py --child NAME`) -----------------------------------------


def _write_marker(name: str, text: str) -> None:
    """<ZOO_WORKDIR>/name, written whole (a temporary file, then a rename): a reader never sees half."""
    path = Path(os.environ["ZOO_WORKDIR"]) / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _ready(note: dict) -> None:
    _write_marker("READY", json.dumps(note))


def child_cuda_sync() -> None:
    import torch

    cycles_per_s = _queue_gpu_seconds(QUEUED_GPU_SECONDS)
    _ready({"cycles_per_s": cycles_per_s, "kernels": int(QUEUED_GPU_SECONDS)})
    torch.cuda.current_stream().synchronize()  # the hang: cudaStreamSynchronize for minutes


def _queue_gpu_seconds(seconds: float, kernel_seconds: float = 1.0) -> float:
    """Queue about `seconds` of torch.cuda._sleep kernels (each `kernel_seconds` long) and return the
    cycles a second."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(100_000_000)
    end.record()
    end.synchronize()
    cycles_per_s = 100_000_000 / (start.elapsed_time(end) / 1000.0)
    for _ in range(int(seconds / kernel_seconds)):
        torch.cuda._sleep(int(cycles_per_s * kernel_seconds))
    return cycles_per_s


def child_sync_in_library() -> None:
    import torch

    model = torch.nn.Linear(256, 256).cuda()
    model(torch.randn(32, 256, device="cuda")).sum().backward()
    cycles_per_s = _queue_gpu_seconds(QUEUED_GPU_SECONDS)
    _ready({"cycles_per_s": cycles_per_s, "kernels": int(QUEUED_GPU_SECONDS)})
    # the hang: the norm's finiteness check reads a GPU value back, behind minutes of queued kernels
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)


def child_empty_cache_wait() -> None:
    import torch

    block = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    del block  # kept by the caching allocator: empty_cache() has a block to cudaFree
    cycles_per_s = _queue_gpu_seconds(QUEUED_GPU_SECONDS, kernel_seconds=7.0)
    _ready({"cycles_per_s": cycles_per_s, "kernels": int(QUEUED_GPU_SECONDS / 7.0)})
    torch.cuda.empty_cache()  # the hang: cudaFree synchronizes with the device
    torch.cuda.synchronize()


def child_pin_wait() -> None:
    import torch

    cycles_per_s = _queue_gpu_seconds(QUEUED_GPU_SECONDS, kernel_seconds=7.0)
    _ready({"cycles_per_s": cycles_per_s, "kernels": int(QUEUED_GPU_SECONDS / 7.0)})
    torch.empty(64 << 20, dtype=torch.uint8, pin_memory=True)
    torch.cuda.synchronize()


def _multiply_forever(kilobytes: int) -> None:
    import torch

    x = torch.ones(kilobytes << 8, device="cuda")  # float32: kilobytes KiB
    print("started", flush=True)
    for _ in range(2000):
        x.mul_(1.0000001)
    torch.cuda.synchronize()
    _ready({"kilobytes": kilobytes})
    while True:
        x.mul_(1.0000001)  # the queue fills: the host waits in the launch, the GPU works


def child_launch_bound() -> None:
    _multiply_forever(2048 << 10)


def child_launch_bound_small() -> None:
    _multiply_forever(16 << 10)


def child_launch_bound_tiny() -> None:
    _multiply_forever(64)


def child_lstm_long() -> None:
    import torch

    lstm = torch.nn.LSTM(64, 256, num_layers=2).cuda()
    x = torch.randn(100_000, 8, 64, device="cuda")  # (steps, batch, features)
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=False):
        lstm(x[:1000])
        torch.cuda.synchronize()
        _ready({"steps": x.shape[0]})
        while True:
            lstm(x)  # one call: cuDNN launches a kernel or more per step


class _NeverDataset:
    def __len__(self) -> int:
        return 1000

    def __getitem__(self, index: int):
        time.sleep(10**6)  # a worker stuck on its sample: no batch ever comes


def _stalled_loader(pin_memory: bool) -> None:
    import torch

    model = torch.nn.Linear(64, 64).cuda()
    model(torch.randn(8, 64, device="cuda")).sum().backward()
    torch.cuda.synchronize()
    loader = torch.utils.data.DataLoader(_NeverDataset(), batch_size=4, num_workers=2, pin_memory=pin_memory)
    batches = iter(loader)
    _ready({"workers": 2, "pin_memory": pin_memory})
    next(batches)  # the hang: the main thread waits for a batch, the GPU idles


def child_dataloader() -> None:
    _stalled_loader(pin_memory=False)


def child_dataloader_pinned() -> None:
    _stalled_loader(pin_memory=True)  # the main thread waits on the pin-memory thread, which waits on the workers


def child_nccl_fr() -> None:
    import torch
    import torch._C._distributed_c10d as c10d
    import torch.distributed as dist

    # a CUDA build names them after NCCL; _dump_fr_trace* are the newer, backend-neutral names
    dump_pickle = getattr(c10d, "_dump_nccl_trace", None) or c10d._dump_fr_trace
    dump_json = getattr(c10d, "_dump_nccl_trace_json", None) or c10d._dump_fr_trace_json

    workdir = Path(os.environ["ZOO_WORKDIR"])
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"file://{workdir / 'store'}", rank=0, world_size=1)
    t = torch.ones(1024, device="cuda")
    for _ in range(3):
        dist.all_reduce(t)
    dist.broadcast(t, 0)
    torch.cuda.synchronize()
    _queue_gpu_seconds(QUEUED_GPU_SECONDS)
    work = dist.all_reduce(t, async_op=True)  # NCCL's stream waits for the sleeping kernels
    prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
    as_json = dump_json()  # str on some versions, bytes on others
    as_json = as_json.encode() if isinstance(as_json, str) else as_json
    for path, data in ((f"{prefix}0", dump_pickle()), (f"{prefix}0.json", as_json)):
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    _ready({"fr_dump": f"{prefix}0"})
    work.wait()
    torch.cuda.synchronize()  # the hang: the host waits for the queued kernels and the all_reduce


def _train_forever(log_every: int) -> None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4096, 8192), nn.GELU(), nn.Linear(8192, 4096)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(4096, 4096, device="cuda")
    print("training started", flush=True)
    step = 0
    while True:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step += 1
        if step % log_every == 0:
            print(f"step {step} loss {loss.item():.5f}", flush=True)  # .item(): the host waits for the GPU
        if step == 50:
            torch.cuda.synchronize()
            _ready({"steps": step, "log_every": log_every})


def child_healthy_gpu() -> None:
    _train_forever(log_every=50)


def child_quiet_gpu() -> None:
    _train_forever(log_every=10**9)


def child_jax_init() -> None:
    import jax

    port = int(os.environ["JAX_INIT_PORT"])
    _ready({"port": port, "jax": jax.__version__})
    # the hang: process 1 never connects, and initialize waits for every process to register
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=0, initialization_timeout=900
    )


def _peer_ready() -> None:
    """Rank 1 says it is about to reach its wait; rank 0 waits for that before READY."""
    _write_marker("RANK1", str(os.getpid()))


def _ready_with_peer(note: dict) -> None:
    path = Path(os.environ["ZOO_WORKDIR"]) / "RANK1"
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    peer = int(path.read_text()) if path.exists() else None
    _ready({**note, "pid": os.getpid(), "peer": peer})


def child_nccl_late_rank() -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)  # one GPU: both ranks on it (rank 1 never reaches NCCL: no duplicate-GPU error)
    dist.init_process_group("nccl")
    t = torch.ones(1024, device="cuda")
    if dist.get_rank() == 1:
        shard = Path(os.environ["ZOO_WORKDIR"]) / "shard-1.fifo"
        os.mkfifo(shard)
        _peer_ready()
        with open(shard, "rb") as fh:  # the hang: a shard that never comes (no writer opens the FIFO)
            t += len(fh.read())
    else:
        _ready_with_peer({"backend": "nccl"})
    dist.all_reduce(t)  # rank 0: NCCL sets up its communicator here, and that needs rank 1


def _rank1_waits_in_barrier() -> bool:
    """torchrun, two gloo ranks on the one GPU: rank 1 says it is ready and waits in dist.barrier()
    for rank 0's long pass (a healthy wait). True in rank 1, once the barrier returns."""
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("gloo")
    if dist.get_rank() != 1:
        return False
    _peer_ready()
    dist.barrier()
    return True


def child_eval_while_waiting() -> None:
    import torch
    from torch import nn

    if _rank1_waits_in_barrier():
        return
    model = nn.Sequential(nn.Linear(4096, 8192), nn.GELU(), nn.Linear(8192, 4096)).cuda().eval()
    x = torch.randn(4096, 4096, device="cuda")
    _ready_with_peer({"backend": "gloo"})
    total = 0.0
    with torch.no_grad():
        while True:  # a long evaluation with a silent log
            for _ in range(20):
                total += model(x).float().abs().mean().item()


def child_compile_autotune() -> None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    widths = [1024, 1536, 2048, 2560, 3072, 3584, 4096, 1280]  # distinct shapes: each matmul is autotuned
    layers: list = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.GELU()]
    model = nn.Sequential(*layers).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_fn = torch.compile(model, mode="max-autotune-no-cudagraphs")
    x = torch.randn(2048, widths[0], device="cuda")
    print("compiling the first step", flush=True)
    _ready({"pid": os.getpid()})
    step = 0
    while True:
        loss = step_fn(x).float().pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step += 1
        if step == 1 or step % 50 == 0:
            print(f"step {step} loss {loss.item():.5f}", flush=True)


class _DecodeDataset:
    """Every sample costs DECODE_SECONDS of CPU in pure Python (a decode stand-in): far longer than
    a diagnosis, so no batch arrives while the tool looks."""

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, index: int):
        import torch

        _write_marker(f"computing-{os.getpid()}", str(index))
        started, total = time.monotonic(), 0
        while time.monotonic() - started < DECODE_SECONDS:
            for k in range(2000):
                total += (k * index) % 7
        return torch.full((64,), float(total))


def child_input_bound() -> None:
    import threading

    import torch

    model = torch.nn.Linear(64, 64).cuda()
    loader = torch.utils.data.DataLoader(_DecodeDataset(), batch_size=4, num_workers=2)
    batches = iter(loader)
    workdir = Path(os.environ["ZOO_WORKDIR"])

    def announce() -> None:
        deadline = time.monotonic() + 60
        while len(list(workdir.glob("computing-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # the main thread is in its wait for the first batch by now
        _ready({"workers": sorted(int(m.name.split("-")[1]) for m in workdir.glob("computing-*"))})

    threading.Thread(target=announce, daemon=True).start()
    for step, x in enumerate(batches):  # healthy: a batch every DECODE_SECONDS * 2, the GPU idle between
        model(x.cuda()).sum().backward()
        if step % 100 == 0:
            print(f"step {step}", flush=True)


def child_save_while_waiting() -> None:
    import torch

    if _rank1_waits_in_barrier():
        return
    state = {f"layer{i}.weight": torch.randn(8192, 8192, device="cuda") for i in range(8)}  # 2 GiB
    target = Path(os.environ["ZOO_WORKDIR"]) / "ckpt.pt"
    _ready_with_peer({"backend": "gloo", "checkpoint": str(target)})
    while True:  # a long save with a silent log: rank 0 alone writes, as most trainers do
        torch.save(state, f"{target}.tmp")
        os.replace(f"{target}.tmp", target)


def child_stopped_rank() -> None:
    import signal

    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("gloo")
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)  # one collective that completes
    if dist.get_rank() == 1:
        _peer_ready()
        os.kill(os.getpid(), signal.SIGSTOP)  # the hang: frozen (a debugger, a job scheduler's suspend)
    else:
        _ready_with_peer({"backend": "gloo"})
    dist.all_reduce(t)  # rank 0 waits for the stopped rank for ever


class _RandomRows:
    """Rows of random numbers made on demand (no data set in memory)."""

    def __init__(self, width: int, length: int = 10**6):
        self.width, self.length = width, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        import torch

        return torch.randn(self.width)


def child_lightning_val() -> None:
    import lightning as L
    import torch
    from torch import nn

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4096, 8192), nn.GELU(), nn.Linear(8192, 4096))

        def training_step(self, batch, batch_idx):
            return self.net(batch).float().pow(2).mean()

        def validation_step(self, batch, batch_idx):
            out = batch
            for _ in range(20):  # a heavy evaluation with a silent log
                out = self.net(out)
            if batch_idx == 5:
                _ready({"validation_batches": batch_idx})
            return out.float().abs().mean()

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    loader = torch.utils.data.DataLoader
    trainer = L.Trainer(
        accelerator="gpu",
        devices=1,
        max_epochs=1,
        limit_train_batches=2,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        logger=False,
    )
    trainer.fit(Model(), loader(_RandomRows(4096, 64), batch_size=32), loader(_RandomRows(4096), batch_size=1024))


def child_hf_eval() -> None:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

    class Tokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 10**6

        def __getitem__(self, index: int):
            return {"input_ids": torch.randint(0, 30000, (256,)), "labels": torch.tensor(index % 2)}

    class ReadyAfterFiveSteps(TrainerCallback):
        steps = 0

        def on_prediction_step(self, args, state, control, **kwargs):
            self.steps += 1
            if self.steps == 5:
                _ready({"prediction_steps": self.steps})

    config = BertConfig(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16, intermediate_size=4096)
    args = TrainingArguments(
        output_dir=str(Path(os.environ["ZOO_WORKDIR"]) / "out"),
        per_device_eval_batch_size=64,
        dataloader_num_workers=2,
        bf16=True,
        report_to="none",
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=BertForSequenceClassification(config), args=args, eval_dataset=Tokens(), callbacks=[ReadyAfterFiveSteps()]
    )
    trainer.evaluate()  # a long evaluation with a silent log (healthy)


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


def record_nvml_raw(path: Path, seconds: float) -> str:
    """The raw NVML values of every device, in RecordedBackend's shape (three utilization
    readings as its series), read in a daemon thread bounded by `seconds`."""
    import threading

    from debug_stuck.probes.collectors.gpu.backends import NVML_FIELDS, GpuCallError, NvmlBackend

    found: dict = {}

    def read() -> None:
        backend = NvmlBackend()
        backend.init()
        try:
            devices = []
            for index in range(backend.device_count()):
                device: dict = {}
                for name in NVML_FIELDS:
                    try:
                        device[name] = backend.read(index, name)
                    except GpuCallError as exc:
                        device[name] = {"error": str(exc)}
                series = []
                for _ in range(3):
                    time.sleep(0.3)
                    series.append(backend.read(index, "utilization"))
                device["utilization_series"] = series
                devices.append(device)
            found["devices"] = devices
        finally:
            backend.shutdown()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(max(1.0, seconds))
    if "devices" not in found:
        return "could not read NVML within the bound"
    source = f"raw NVML, recorded by bench/gpu_check.py on {time.strftime('%Y-%m-%d')}"
    path.write_text(json.dumps({"_source": source, "vendor": "nvidia", "devices": found["devices"]}, indent=1))
    return "recorded"


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
        out.write_text("skipped: the run's time budget was spent\n")
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


def verdict_of(report: Path) -> dict:
    """The report's verdict in brief (hung, cause, confidence, culprit), or why it could not be read."""
    try:
        data = json.loads(report.read_text())
        verdict = data["verdict"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return {"error": f"no verdict: {exc}"}
    brief = {k: verdict.get(k) for k in ("hung", "state", "cause", "confidence")}
    brief["top3"] = [(d.get("cause"), d.get("confidence")) for d in (data.get("diagnoses") or [])[:3]]
    brief["culprit"] = data.get("culprit")
    brief["summary"] = str(verdict.get("summary", ""))[:300]
    return brief


def record(name: str, root: Path, out: Path, budget: Budget, jobs: list) -> dict:
    from debug_stuck.probes.collectors.gpu.collect import collect_gpus
    from debug_stuck.zoo import spawn

    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    wait = budget.left(READY_SECONDS)
    if wait <= 0:
        return {"skipped": "the run's time budget was spent"}
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", name]
    env = {}
    if name == "nccl_fr":
        fr_dir = Path(tempfile.mkdtemp(prefix="fr-", dir=root))
        env = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_FR_DUMP_TEMP_FILE": str(fr_dir / FR_PREFIX)}
        env["TORCH_NCCL_TRACE_BUFFER_SIZE"] = "2000"  # the name before torch 2.5
    elif name == "jax_init":
        env = {"JAX_PLATFORMS": "cpu", "JAX_INIT_PORT": str(spawn.free_port())}
    elif name in TORCHRUN:
        port = spawn.free_port()
        run = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1"]
        argv = [*run, f"--master_port={port}", *argv[1:]]
        env = {"GLOO_SOCKET_IFNAME": "lo"}
    try:
        job = spawn.start(
            f"gpu-{name}", root, ready_timeout=wait, argv=argv, env=env, wait_ready=True, on_spawn=jobs.append
        )
    except spawn.ZooStartError as exc:
        (folder / "start-error.txt").write_text(str(exc))
        return {"error": f"the job did not reach its hang: {str(exc).splitlines()[0]}"}
    pid = int(job.info.get("pid") or job.proc.pid)  # a torchrun job's READY names rank 0
    steps = {"pid": pid, "ready": job.info}
    if name in ("jax_init", *TORCHRUN):
        time.sleep(min(5.0, budget.left(5.0)))  # READY comes just before the call: let it reach its wait
    nvml = collect_gpus(timeout=max(1.0, budget.left(15)), samples=3, interval=0.5)
    (folder / "nvml.json").write_text(json.dumps(nvml.to_dict(), indent=1))
    steps["nvml"] = [d.fact_line() for d in nvml.devices]
    steps["nvml-raw"] = record_nvml_raw(folder / "nvml-raw.json", budget.left(10))
    diagnose = [sys.executable, "-m", "debug_stuck", "diagnose", "--pid", str(pid), "--format", "json"]
    steps["diagnose"] = run_tool(diagnose, budget.left(DIAGNOSE_SECONDS), folder / "report.json")
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    targets = [("", pid)] + ([("peer-", int(job.info["peer"]))] if job.info.get("peer") else [])
    for prefix, target in targets:
        dump = [py_spy, "dump", "--pid", str(target)]
        steps[f"{prefix}py-spy"] = run_tool(dump, budget.left(TOOL_SECONDS), folder / f"{prefix}py-spy.txt")
        native = [py_spy, "dump", "--native", "--pid", str(target)]
        native_out = folder / f"{prefix}py-spy-native.txt"
        steps[f"{prefix}py-spy-native"] = run_tool(native, budget.left(TOOL_SECONDS), native_out)
        pystack = [sys.executable, "-m", "pystack", "remote", str(target), "--native"]
        steps[f"{prefix}pystack"] = run_tool(pystack, budget.left(TOOL_SECONDS), folder / f"{prefix}pystack.txt")
    if name == "nccl_fr":
        from debug_stuck.probes.collectors.procs import maps_mention

        steps["libnccl_mapped"] = maps_mention(pid, "libnccl")
        ras = shutil.which("ncclras")
        steps["ncclras"] = ras or "not on the PATH"
        if ras:
            steps["ncclras-v"] = run_tool([ras, "-v", "-t", "10"], budget.left(20), folder / "ncclras.txt")
    steps["verdict"] = verdict_of(folder / "report.json")
    job.stop()
    shutil.copyfile(job.log, folder / "log.txt")
    if env.get("TORCH_FR_DUMP_TEMP_FILE"):
        for dump in Path(env["TORCH_FR_DUMP_TEMP_FILE"]).parent.glob(f"{FR_PREFIX}*"):
            shutil.copyfile(dump, folder / dump.name)
    return steps


def main(argv: list) -> int:
    if len(argv) == 3 and argv[1] == "--child" and argv[2] in SCENARIOS:
        try:
            globals()[f"child_{argv[2]}"]()
        except BaseException:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)  # at once: NCCL's teardown after a failure can hang, and the check waits on exit
        return 0
    total = float(TOTAL_SECONDS)
    chosen = list(SCENARIOS)
    usage = "usage: python bench/gpu_check.py OUT_DIR [--seconds N] [--only NAME,...] (a folder for the recordings)"
    rest = argv[2:]
    while rest:
        if len(rest) < 2 or rest[0] not in ("--seconds", "--only"):
            print(usage, file=sys.stderr)
            return 2
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--seconds":
            try:
                total = float(value)
            except ValueError:
                total = -1.0
            if not 60 <= total <= TOTAL_SECONDS:
                print(f"--seconds takes a number from 60 to {TOTAL_SECONDS}", file=sys.stderr)
                return 2
        else:
            chosen = [name for name in value.split(",") if name]
            unknown = [name for name in chosen if name not in SCENARIOS]
            if unknown or not chosen:
                print(f"--only takes names from {', '.join(SCENARIOS)}; not {', '.join(unknown)}", file=sys.stderr)
                return 2
    argv = argv[:2]
    if len(argv) != 2 or argv[1].startswith("-"):
        print(usage, file=sys.stderr)
        return 2
    reason = no_gpu_reason()
    if reason:
        print(f"no NVIDIA GPU here: {reason}; nothing to check")
        return 0
    out = Path(argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(total)
    root = Path(tempfile.mkdtemp(prefix="debug-stuck-gpu-check-"))
    jobs: list = []
    summary: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        import torch

        summary["torch"] = torch.__version__
        summary["cuda"] = torch.version.cuda
        summary["gpu"] = torch.cuda.get_device_name(0)
        for name in chosen:
            summary[name] = record(name, root, out, budget, jobs)
    finally:
        for job in jobs:
            try:
                job.stop()
            except RuntimeError as exc:  # a process survived SIGKILL (D state): say so
                summary.setdefault("leftovers", []).append(str(exc))
        shutil.rmtree(root, ignore_errors=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
    failed = [n for n in chosen if "error" in summary.get(n, {}) or summary.get(n, {}).get("skipped")]
    failed += [n for n in chosen if summary.get(n, {}).get("diagnose", {}).get("returncode") not in (0, None)]
    # a healthy job called hung is a false alarm: the check fails
    failed += [n for n in chosen if n in HEALTHY and (summary.get(n, {}).get("verdict") or {}).get("hung")]
    for name in chosen:
        print(f"{name}: {json.dumps(summary.get(name, {}).get('verdict'))}")
    print(f"recorded under {out}: {', '.join(chosen)}" + (f"; problems: {', '.join(failed)}" if failed else ""))
    return 1 if failed or summary.get("leftovers") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
