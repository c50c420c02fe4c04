"""Whose code a frame is, and whether a busy thread turns in one loop of its own code.

Two samples of a busy thread cannot tell a long computation from an endless loop by motion alone:
both change line. What separates them is where the time goes. A thread that never leaves one
function of the job's own code, calling at most the standard library (``os.path.exists``,
``time.time``), turns in a loop of its own: nothing outside it can end the loop but a condition
it polls. A thread whose samples go down into a library's compute (a model's forward through
torch, numpy) is doing work that ends when the data does. The first is stuck on its own loop;
the second is busy, which is progress until other evidence (the log's rhythm) says otherwise.
"""

from __future__ import annotations

import re
import sys
from typing import List, Optional

STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"threading", "socket", "queue", "subprocess"}
LIBRARY_TOPS = frozenset(
    "torch torchvision transformers accelerate deepspeed lightning pytorch_lightning lightning_fabric datasets "
    "huggingface_hub safetensors requests urllib3 httpx httpcore aiohttp boto3 botocore s3fs fsspec gcsfs wandb "
    "mlflow comet_ml neptune tensorboard numpy pandas tqdm filelock triton apex megatron ultralytics diffusers "
    "peft trl timm sentencepiece tokenizers ray dask zmq grpc google azure joblib cloudpickle dill multiprocess "
    "sklearn scipy h5py pyarrow polars zarr lmdb webdataset jax jaxlib flax optax orbax tensorflow keras paddle "
    "mmcv mmengine detectron2 horovod".split()
)
INSTALLED = re.compile(r"/(site|dist)-packages/")


def _file_top(file: Optional[str]) -> str:
    top = (file or "").replace("\\", "/").lstrip("./").split("/", 1)[0]
    return top[:-3] if top.endswith(".py") else top


def is_stdlib(frame) -> bool:
    top = _file_top(frame.file)
    return top in STDLIB or top.startswith("<frozen")


def is_library(frame) -> bool:
    """A frame of the standard library or an installed package, not the job's own code."""
    if is_library_file(frame.file):
        return True
    return bool(frame.path and INSTALLED.search(frame.path.replace("\\", "/")))


def is_library_file(file: Optional[str]) -> bool:
    """A file of the standard library or a well-known package, as py-spy shortens its name."""
    top = _file_top(file)
    return top in STDLIB or top.startswith("<frozen") or top in LIBRARY_TOPS or bool(INSTALLED.search(file or ""))


def own_frame_index(frames) -> Optional[int]:
    """The index (innermost first) of the innermost Python frame of the job's own code."""
    for index, frame in enumerate(frames):
        if not frame.native and not is_library(frame):
            return index
    return None


def _samples(series, tid: int) -> List[list]:
    out = []
    for dump in series.dumps if series is not None else []:
        thread = next((t for t in dump.threads if t.tid == tid), None)
        if thread is not None:
            out.append(list(thread.frames))
    return out


def own_loop(series, tid: int):
    """The frame of the job's own code in which the thread turns, or None.

    It turns there when, in every sample (at least two), its innermost frame of the job's own code
    is the same function and nothing below it but the standard library runs."""
    samples = _samples(series, tid)
    if len(samples) < 2:
        return None
    owners = set()
    last = None
    for frames in samples:
        index = own_frame_index(frames)
        if index is None:
            return None
        if any(not f.native and not is_stdlib(f) for f in frames[:index]):
            return None  # it went down into a library's code: work, not a poll
        owner = frames[index]
        owners.add((owner.bare_name, owner.file))
        last = owner
    return last if len(owners) == 1 else None
