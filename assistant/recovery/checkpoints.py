"""Is this checkpoint usable? Format checks that read headers only, never unpickle, always bounded.

A hang during a save leaves a half-written file behind (or a save hangs on a mount that no longer
answers), and a resume from it crashes or hangs again. These checks tell a usable checkpoint from
a broken one by reading the few bytes that say so:

- torch zip (``torch.save`` since 1.6): the zip central directory, written last, must read, and
  hold ``data.pkl``. A truncated file has no central directory.
- legacy torch (pickle) format: the magic number only (its data follows the pickles unframed).
- plain pickle (``*.pkl`` random states): opens with a protocol header and ends with STOP.
- safetensors: 8-byte little-endian header size, a JSON header, and tensor data offsets that fit
  the file (a truncated file ends before the last tensor's data).
- directories (HF ``checkpoint-N``, accelerate and kohya state dirs): their JSON state parses and
  every weight and state file in them passes the checks above.

Nothing here calls ``torch.load``: that runs pickle, i.e. the user's code. Step numbers inside a
torch zip are read by walking ``data.pkl``'s opcodes with ``pickletools`` (a parser, not a loader).

Every read runs under ``call_with_timeout``: checkpoint directories are often on the very mount
that hung the job. Once a read under a directory times out, later reads there are not attempted
(one hung mount would otherwise cost the time bound once per file).
"""

from __future__ import annotations

import io
import json
import os
import pickletools
import re
import stat
import struct
import threading
import zipfile
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.recovery.reading import at

CHECK_SECONDS = 5.0
SAFETENSORS_MAX_HEADER = 100 * 1024 * 1024  # the format's own limit
PICKLE_PEEK_MAX_BYTES = 16 * 1024 * 1024
PICKLE_PEEK_MAX_OPS = 2_000_000

LEGACY_TORCH_MAGIC = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")
ZIP_MAGIC = b"PK\x03\x04"

# names a save gives a file before renaming it into place (ckpt.pt.tmp, tmp-checkpoint-500, x.partial)
PARTIAL_NAME = re.compile(r"(^|[._-])(tmp|temp|part|partial|incomplete|inprogress|in-progress)([._-]|\d|$)", re.I)

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".pkl")
SAFETENSORS_DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "F8_E4M3FN": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
    "C64": 8,
}


@dataclass
class FileCheck:
    """The verdict on one file or directory: problem is None when it looks usable."""

    path: str
    problem: Optional[str] = None
    fmt: Optional[str] = None  # torch-zip | torch-legacy | pickle | safetensors | json | dir
    values: Dict[str, Optional[int]] = field(default_factory=dict)  # step/epoch found inside, if any

    @property
    def ok(self) -> bool:
        return self.problem is None


class _HungPaths:
    """Directories where a read did not finish: further reads there are skipped, not retried."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirs: List[str] = []

    def add(self, path: str) -> None:
        with self._lock:
            self._dirs.append(os.path.dirname(os.path.abspath(path)))

    def covering(self, path: str) -> Optional[str]:
        path = os.path.abspath(path)
        with self._lock:
            for d in self._dirs:
                if path == d or path.startswith(d.rstrip("/") + "/"):
                    return d
        return None

    def clear(self) -> None:
        with self._lock:
            self._dirs.clear()


HUNG = _HungPaths()


def bounded(fn, what: str, path: str, seconds: float = CHECK_SECONDS):
    """fn() with a time bound. Returns (value, problem): problem is a one-line reason or None."""
    hung = HUNG.covering(path)
    if hung is not None:
        return None, f"unreadable: an earlier read under {hung} did not finish (a hung mount?)"
    try:
        return call_with_timeout(fn, seconds, what), None
    except CallTimedOut:
        HUNG.add(path)
        return None, f"unreadable: {what} did not finish within {seconds:g} s (a hung mount?)"
    except PermissionError:
        return None, "unreadable: permission denied"
    except FileNotFoundError:
        return None, "missing: it disappeared while being checked"
    except OSError as exc:
        return None, f"unreadable: {exc.strerror or exc}"


def is_partial_name(path: str) -> bool:
    """A temporary name of an unfinished save (``ckpt.pt.tmp``, ``tmp-checkpoint-500``, ``x.partial``)."""
    name = os.path.basename(path.rstrip("/"))
    if name.startswith(".") and name.count(".") >= 2 and PARTIAL_NAME.search(name[1:]):
        return True
    return bool(PARTIAL_NAME.search(name))


def _file_kind(st: os.stat_result) -> Optional[str]:
    if stat.S_ISREG(st.st_mode):
        return None
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device")):
        if test(st.st_mode):
            return name
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    return "not a plain file"


# -- files -----------------------------------------------------------------------------------------


def check_file(path: str, want_values: Iterable[str] = ()) -> FileCheck:
    """Check one checkpoint file by its format (found from its first bytes, or its name).

    ``want_values``: integer keys to look for in a torch zip's data.pkl (e.g. ``global_step``),
    read without unpickling; the first occurrence of each is returned in ``values``.
    """
    result = FileCheck(path)
    st, problem = bounded(lambda: os.stat(at(path)), f"stat {path}", path)
    if problem:
        result.problem = problem
        return result
    other = _file_kind(st)
    if other:
        # never open a FIFO or a device: the open itself would block (a save hung on a FIFO)
        result.problem = f"not a regular file ({other})"
        return result
    if st.st_size == 0:
        result.problem = "empty file (0 bytes): an unfinished save"
        return result
    head, problem = bounded(lambda: _read_head(path, 16), f"reading {path}", path)
    if problem:
        result.problem = problem
        return result
    size = st.st_size
    if head.startswith(ZIP_MAGIC):
        result.fmt = "torch-zip"
        result.problem, result.values = _check_zip(path, size, tuple(want_values))
    elif path.endswith(".safetensors"):
        result.fmt = "safetensors"
        result.problem = check_safetensors(path, size)
    elif head.startswith(LEGACY_TORCH_MAGIC):
        result.fmt = "torch-legacy"
    elif head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        result.fmt = "pickle"
        tail, problem = bounded(lambda: _read_tail(path, 1), f"reading {path}", path)
        if problem:
            result.problem = problem
        elif tail != b".":
            result.problem = "truncated: the pickle does not end with its STOP opcode"
    elif len(head) > 8 and head[8:9] == b"{":  # safetensors under another name (the JSON header opens)
        result.fmt = "safetensors"
        result.problem = check_safetensors(path, size)
    elif path.endswith(".json"):
        result.fmt = "json"
        result.problem = check_json(path)[1]
    elif head.strip(b"\x00") == b"":
        result.problem = "no header: the file starts with zero bytes (space reserved, never written)"
    else:
        result.problem = "unknown format: neither a torch zip, a torch pickle nor safetensors"
    return result


def _read_head(path: str, n: int) -> bytes:
    with open(at(path), "rb") as fh:
        return fh.read(n)


def _read_tail(path: str, n: int) -> bytes:
    with open(at(path), "rb") as fh:
        fh.seek(-n, os.SEEK_END)
        return fh.read(n)


def _check_zip(path: str, size: int, want: Tuple[str, ...]) -> Tuple[Optional[str], Dict[str, Optional[int]]]:
    def read():
        with zipfile.ZipFile(at(path)) as zf:
            infos = zf.infolist()
            names = [i.filename for i in infos]
            pkl = next((n for n in names if n.endswith("/data.pkl") or n == "data.pkl"), None)
            if pkl is None:
                return "not a torch checkpoint: the zip holds no data.pkl", {}
            end = max((i.header_offset + i.compress_size for i in infos), default=0)
            if end > size:
                return f"truncated: zip entries end at byte {end}, the file has {size} bytes", {}
            values: Dict[str, Optional[int]] = {}
            info = zf.getinfo(pkl)
            if info.file_size <= PICKLE_PEEK_MAX_BYTES:
                data = zf.read(pkl)
                if holds_one_tensor(data):
                    return "not a training checkpoint: it holds one tensor (data, not a model's state)", {}
                values = peek_pickle_values(data, want) if want else {}
            return None, values

    try:
        out, problem = bounded(read, f"reading the zip directory of {path}", path)
    except zipfile.BadZipFile as exc:
        return _zip_problem(str(exc)), {}
    except (zipfile.LargeZipFile, EOFError, ValueError, KeyError, struct.error) as exc:
        return f"corrupt: {exc}", {}
    if problem:
        return problem, {}
    return out


def _zip_problem(message: str) -> str:
    if "not a zip file" in message.lower() or "end-of-central-directory" in message.lower():
        return "truncated: zip central directory missing"
    return f"corrupt: {message}"


def holds_one_tensor(data: bytes) -> bool:
    """Whether a torch file's data.pkl is one tensor at its top (torch.save(tensor): a shard of data,
    an embedding table), not the dict or module of a training state: its first object is built by
    torch._utils._rebuild_tensor_v2 (by opcodes only, as peek_pickle_values)."""
    try:
        for op, arg, _pos in pickletools.genops(io.BytesIO(data)):
            if op.name in ("PROTO", "FRAME"):
                continue
            return op.name == "GLOBAL" and str(arg).startswith("torch._utils _rebuild_tensor")
    except Exception:
        return False
    return False


def peek_pickle_values(data: bytes, keys: Tuple[str, ...]) -> Dict[str, Optional[int]]:
    """The first integer (or None) stored right after each string key in a pickle, by opcodes only.

    ``{"global_step": 1200, ...}`` pickles as the key string, perhaps a memo opcode, then the int.
    This walks the opcodes (``pickletools.genops`` parses; it never builds objects or imports).
    """
    found: Dict[str, Optional[int]] = {}
    pending: Optional[str] = None
    try:
        for count, (op, arg, _pos) in enumerate(pickletools.genops(io.BytesIO(data))):
            if count > PICKLE_PEEK_MAX_OPS:
                break
            name = op.name
            if name in ("BINPUT", "LONG_BINPUT", "MEMOIZE", "PUT"):
                continue  # the memo bookkeeping between a key and its value
            if pending is not None:
                if name in ("BININT", "BININT1", "BININT2", "LONG1", "LONG4", "INT", "LONG") and isinstance(arg, int):
                    found[pending] = arg
                elif name == "NONE":
                    found[pending] = None
                pending = None
            if name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE") and arg in keys:
                if arg not in found:
                    pending = arg
            if len(found) == len(keys):
                break
    except Exception:  # a truncated or unusual pickle: what was found so far still stands
        pass
    return found


def check_safetensors(path: str, size: Optional[int] = None) -> Optional[str]:
    """None when the header parses and every tensor's data fits the file, else the problem."""

    def read():
        file_size = size if size is not None else os.stat(at(path)).st_size
        with open(at(path), "rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                return f"truncated: {file_size} bytes, shorter than the 8-byte header size"
            (header_len,) = struct.unpack("<Q", raw)
            if header_len > SAFETENSORS_MAX_HEADER:
                return f"corrupt: header size {header_len} is implausible (not safetensors, or garbage)"
            if 8 + header_len > file_size:
                return f"truncated: the header needs {8 + header_len} bytes, the file has {file_size}"
            header_bytes = fh.read(header_len)
        try:
            header = json.loads(header_bytes.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return "corrupt: the safetensors header is not valid JSON"
        if not isinstance(header, dict):
            return "corrupt: the safetensors header is not a JSON object"
        data_end = 0
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            try:
                begin, end = entry["data_offsets"]
                dtype, shape = entry["dtype"], entry["shape"]
            except (TypeError, KeyError, ValueError):
                return f"corrupt: tensor {name!r} has no data_offsets/dtype/shape"
            if not (0 <= begin <= end):
                return f"corrupt: tensor {name!r} has offsets {begin}..{end}"
            width = SAFETENSORS_DTYPE_BYTES.get(dtype)
            if width is not None:
                count = 1
                for dim in shape:
                    count *= int(dim)
                if count * width != end - begin:
                    return f"corrupt: tensor {name!r} is {end - begin} bytes, its shape and dtype need {count * width}"
            data_end = max(data_end, end)
        need = 8 + header_len + data_end
        if need > file_size:
            return f"truncated: safetensors data ends at byte {need}, the file has {file_size} bytes"
        return None

    value, problem = bounded(read, f"reading the safetensors header of {path}", path)
    return problem or value


def check_json(path: str) -> Tuple[Optional[object], Optional[str]]:
    """(parsed JSON, None) or (None, problem)."""

    def read():
        with open(at(path), "rb") as fh:
            return fh.read(64 * 1024 * 1024)

    raw, problem = bounded(read, f"reading {path}", path)
    if problem:
        return None, problem
    if not raw:
        return None, "empty file (0 bytes): an unfinished save"
    try:
        return json.loads(raw.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError):
        return None, "truncated or corrupt: not valid JSON"


# -- directories -----------------------------------------------------------------------------------

HF_MODEL_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "adapter_model.safetensors",
    "adapter_model.bin",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
)
ACCELERATE_MODEL = re.compile(r"^(model(_\d+)?\.safetensors|pytorch_model(_\d+)?\.bin|model(_\d+)?\.bin)$")
ACCELERATE_STATE = re.compile(
    r"^(optimizer(_\d+)?\.bin|scheduler(_\d+)?\.bin|sampler(_\d+)?\.bin|dl_state_dict(_\d+)?\.bin|"
    r"random_states_\d+\.pkl|scaler\.pt|custom_checkpoint_\d+\.pkl)$"
)


def list_dir(path: str) -> Tuple[List[str], Optional[str]]:
    names, problem = bounded(lambda: sorted(os.listdir(at(path))), f"listing {path}", path)
    return (names or []), problem


def _check_files(directory: str, names: Iterable[str]) -> Optional[str]:
    """The first problem among these files of a directory, named, or None."""
    for name in names:
        full = os.path.join(directory, name)
        if name.endswith(".index.json"):
            problem = _check_sharded(directory, name)
        elif name.endswith(".json"):
            problem = check_json(full)[1]
        else:
            problem = check_file(full).problem
        if problem:
            return f"{name}: {problem}"
    return None


def _check_sharded(directory: str, index_name: str) -> Optional[str]:
    index, problem = check_json(os.path.join(directory, index_name))
    if problem:
        return problem
    shards = sorted(set((index or {}).get("weight_map", {}).values())) if isinstance(index, dict) else []
    if not shards:
        return "corrupt: the index names no shard"
    names, problem = list_dir(directory)
    if problem:
        return problem
    missing = [s for s in shards if s not in names]
    if missing:
        return f"missing shard(s): {', '.join(missing[:3])}"
    for shard in shards:
        problem = check_file(os.path.join(directory, shard)).problem
        if problem:
            return f"{shard}: {problem}"
    return None


def check_hf_checkpoint(path: str) -> FileCheck:
    """An HF Trainer ``checkpoint-N``: trainer_state.json parses, model weights and state files pass."""
    result = FileCheck(path, fmt="dir")
    names, problem = list_dir(path)
    if problem:
        result.problem = problem
        return result
    if "trainer_state.json" not in names:
        result.problem = "missing trainer_state.json (the save did not finish)"
        return result
    state, problem = check_json(os.path.join(path, "trainer_state.json"))
    if problem:
        result.problem = f"trainer_state.json: {problem}"
        return result
    if isinstance(state, dict) and isinstance(state.get("global_step"), int):
        result.values["global_step"] = state["global_step"]  # (its epoch is fractional: not kept)
    models = [n for n in HF_MODEL_FILES if n in names]
    # a sharded save lists its index; check the index (and its shards), not the bare shard names
    if any(n.endswith(".index.json") for n in models):
        models = [n for n in models if n.endswith(".index.json")] + [
            n for n in models if not n.endswith(".index.json") and f"{n}.index.json" not in names
        ]
    deepspeed = [n for n in names if n.startswith("global_step")]
    if not models and not deepspeed:
        result.problem = "no model weights (model.safetensors, pytorch_model.bin or an adapter)"
        return result
    states = [n for n in names if n in ("optimizer.pt", "scheduler.pt", "scaler.pt") or n.startswith("rng_state")]
    problem = _check_files(path, models + states)
    if problem is None and deepspeed and not models:
        problem = _check_deepspeed(os.path.join(path, deepspeed[-1]))
    result.problem = problem
    return result


def _check_deepspeed(path: str) -> Optional[str]:
    names, problem = list_dir(path)
    if problem:
        return problem
    pts = [n for n in names if n.endswith(".pt")]
    if not pts:
        return f"{os.path.basename(path)}: no DeepSpeed state files"
    problem = _check_files(path, pts)
    return f"{os.path.basename(path)}/{problem}" if problem else None


def is_accelerate_state(names: Iterable[str]) -> bool:
    names = list(names)
    return any(ACCELERATE_STATE.match(n) for n in names) and (
        any(ACCELERATE_MODEL.match(n) for n in names) or any(n.startswith("optimizer") for n in names)
    )


def check_state_dir(path: str) -> FileCheck:
    """An ``accelerator.save_state`` directory (also kohya ``-state`` dirs): every file passes."""
    result = FileCheck(path, fmt="dir")
    names, problem = list_dir(path)
    if problem:
        result.problem = problem
        return result
    models = [n for n in names if ACCELERATE_MODEL.match(n)]
    states = [n for n in names if ACCELERATE_STATE.match(n)]
    if not models and not any(n.startswith("optimizer") for n in states):
        result.problem = "no model or optimizer state in it (the save did not finish)"
        return result
    if "train_state.json" in names:  # kohya: current_epoch / current_step
        state, problem = check_json(os.path.join(path, "train_state.json"))
        if problem:
            result.problem = f"train_state.json: {problem}"
            return result
        if isinstance(state, dict):
            for src, key in (("current_step", "global_step"), ("current_epoch", "epoch")):
                if isinstance(state.get(src), int):
                    result.values[key] = state[src]
    result.problem = _check_files(path, models + states)
    return result
