"""Whose code a frame is: the job's own, or a library's. One reading for live stacks, pasted dumps
and the advice.

A library frame is one of the standard library or of an installed package (its path under
site-packages, dist-packages or lib/pythonX.Y), or of a well-known package wherever it is imported
from: py-spy names a file relative to the sys.path entry it was imported from, so a short name whose
first folder is a known package (``wandb/sdk/lib/...``) is that package in a ``pip --target`` folder,
on PYTHONPATH or in an editable checkout. Under the job's own folders (``own_roots``: where its entry
scripts are) a short name is the job's own code: a project's own ``datasets/`` package is not HF's.
"""

from __future__ import annotations

import posixpath
import re
import sys
from typing import Iterable, List, Optional, Sequence

STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"threading", "socket", "queue", "subprocess"}
LIBRARY_TOPS = frozenset(
    "torch torchvision transformers accelerate deepspeed lightning pytorch_lightning lightning_fabric datasets "
    "huggingface_hub safetensors requests urllib3 httpx httpcore aiohttp boto3 botocore s3fs fsspec gcsfs wandb "
    "mlflow comet_ml neptune tensorboard numpy pandas tqdm filelock triton apex megatron ultralytics diffusers "
    "peft trl timm sentencepiece tokenizers ray dask zmq grpc google azure joblib cloudpickle dill multiprocess "
    "sklearn scipy h5py pyarrow polars zarr lmdb webdataset jax jaxlib flax optax orbax tensorflow keras paddle "
    "mmcv mmengine detectron2 horovod pytest _pytest".split()
)
INSTALLED_PATH = re.compile(r"/(site-packages|dist-packages)/|/lib/python\d+\.\d+/|^<frozen ")


def _top(file: str) -> str:
    top = file.lstrip("./").split("/", 1)[0]
    return top[:-3] if top.endswith(".py") else top


def _stdlib_prefixes() -> List[str]:
    import sysconfig

    paths = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")}
    return [p for p in paths if p]


def is_installed_path(path: Optional[str]) -> bool:
    """A full path under site-packages, dist-packages or this interpreter's standard library."""
    norm = (path or "").replace("\\", "/")
    if INSTALLED_PATH.search(norm):
        return True
    return any(norm.startswith(prefix.replace("\\", "/") + "/") for prefix in _stdlib_prefixes())


def is_library_file(file: Optional[str]) -> bool:
    """A file name, short (as py-spy shortens it) or full, of the standard library or a library."""
    norm = (file or "").replace("\\", "/")
    if is_installed_path(norm):
        return True
    top = _top(norm)
    if top in STDLIB or top.startswith("<frozen"):
        return True
    return "/" in norm.lstrip("./") and not posixpath.isabs(norm) and top in LIBRARY_TOPS


def is_library_code(file: Optional[str], path: Optional[str] = None, own_roots: Sequence[str] = ()) -> bool:
    """A frame (its short `file` and full `path`) of a library, not the job's own code."""
    if is_installed_path(path) or is_installed_path(file):
        return True
    full = (path or file or "").replace("\\", "/")
    if any(full.startswith(root.replace("\\", "/").rstrip("/") + "/") for root in own_roots):
        return False
    return is_library_file(file)


def entry_script_roots(outer_paths: Iterable[Optional[str]]) -> List[str]:
    """The folders of the job's entry scripts, from each thread's outermost `<module>` frame's path
    (`python train.py` puts train.py's folder first on sys.path: what lies under it is the job's)."""
    roots: List[str] = []
    for path in outer_paths:
        norm = (path or "").replace("\\", "/")
        if norm and posixpath.isabs(norm) and not is_installed_path(norm):
            root = posixpath.dirname(norm)
            if root not in roots:
                roots.append(root)
    return roots


__all__ = [
    "LIBRARY_TOPS",
    "STDLIB",
    "entry_script_roots",
    "is_installed_path",
    "is_library_code",
    "is_library_file",
]
