"""Find and read Flight Recorder (FR) dumps: the per-rank files NCCL writes at a watchdog timeout
(`<prefix><rank>`, default prefix /tmp/nccl_trace_rank_), `_dump_fr_trace()` output, JSON dumps.

A source is a folder (its files whose names end in a rank number), a prefix (every file whose
name starts with it) or a file. Pickle or JSON, every format version in core/fr_format.

A pickle runs code when loaded: it is read with an Unpickler that refuses every global, which is
all an FR dump needs (its pickle holds only dicts, lists, tuples, str, int, float, bool and None;
checked with pickletools on torch 2.13's dumps). Every read is bounded in bytes and in time, only
regular files are read, and each failure is a line "could not read X: why", never an exception.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.core.fr_format import normalize_dump
from debug_stuck.inputs import InputError, read_input

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
DUMP_FILE_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")  # newest name first
BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
PIPE_VAR = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
MAX_FILE_BYTES = 64 << 20
MAX_FILES = 1024
READ_SECONDS = 10.0  # one file: read and decode
LIST_SECONDS = 5.0  # one folder listing
_RANK_SUFFIX = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle))?$")
WHAT = "Flight Recorder dump"
EXPECTED = "give a folder, a prefix such as /tmp/nccl_trace_rank_, or dump files"


@dataclass
class FrDump:
    path: str
    rank: Optional[int]
    form: str  # "pickle" | "json"
    data: Dict[str, Any]  # normalized (core.fr_format.normalize_dump)


@dataclass
class FrDumps:
    dumps: List[FrDump] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)

    def by_rank(self) -> Dict[int, Dict[str, Any]]:
        """{rank: dump} for core.flight_recorder.analyze; of two dumps of one rank the pickle wins
        (the JSON form carries no Python frames); dumps of unknown rank are left out."""
        chosen: Dict[int, FrDump] = {}
        for dump in sorted(self.dumps, key=lambda d: (d.form != "pickle", d.path)):
            if dump.rank is None:
                continue
            if dump.rank in chosen:
                self.errors.append(f"rank {dump.rank}: two dumps, used {chosen[dump.rank].path}, not {dump.path}")
                continue
            chosen[dump.rank] = dump
        return {rank: d.data for rank, d in sorted(chosen.items())}


class _PlainUnpickler(pickle.Unpickler):
    """Builds plain containers only: any global (a class, a function) is refused, never imported."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"it names the global {module}.{name}; an FR dump holds plain data only")


def decode_dump(raw: bytes) -> Tuple[Dict[str, Any], str]:
    """(normalized dump, "pickle" | "json") from a file's bytes. Raises ValueError saying why."""
    head = raw.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            data, form = json.loads(raw.decode("utf-8")), "json"
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"not valid JSON ({exc})") from None
    else:  # torch writes protocol 2; any protocol is read the same safe way
        try:
            data, form = _PlainUnpickler(io.BytesIO(raw)).load(), "pickle"
        except pickle.UnpicklingError as exc:
            if "global" in str(exc):
                raise ValueError(f"pickle refused: {exc}") from None
            raise ValueError(f"neither JSON nor a readable pickle ({exc})") from None
        except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError, MemoryError) as exc:
            raise ValueError(f"neither JSON nor a readable pickle ({type(exc).__name__}: {exc})") from None
    return normalize_dump(data), form


def rank_from_name(path: str, prefix: str = "") -> Optional[int]:
    name = os.path.basename(path)
    if prefix and name.startswith(prefix):
        name = name[len(prefix) :]
        match = re.fullmatch(r"(\d+)(?:\.(?:json|pkl|pickle))?", name)
    else:
        match = _RANK_SUFFIX.search(name)
    return int(match.group(1)) if match else None


def read_dump_file(
    path: str, rank: Optional[int] = None, max_bytes: int = MAX_FILE_BYTES, seconds: float = READ_SECONDS
) -> Tuple[Optional[FrDump], Optional[str]]:
    """One dump file; (dump, None) or (None, "could not read PATH: why"). `rank` wins over the
    rank the file's name ends in."""

    def read() -> Tuple[Dict[str, Any], str, int]:
        raw = read_input(path, WHAT, max_bytes + 1, seconds, expected=EXPECTED)
        if len(raw) > max_bytes:
            raise ValueError(f"larger than {max_bytes >> 20} MiB: not an FR dump")
        data, form = decode_dump(raw)
        return data, form, len(raw)

    try:
        data, form, _ = call_with_timeout(read, seconds, f"reading {path}")
    except InputError as exc:
        return None, f"could not read {path}: {exc.reason}"
    except CallTimedOut:
        return None, f"could not read {path}: not read and decoded within {seconds:g} s"
    except (OSError, ValueError) as exc:
        return None, f"could not read {path}: {exc}"
    if rank is None:
        rank = data.get("rank") if isinstance(data.get("rank"), int) else rank_from_name(path)
    return FrDump(path, rank, form, data), None


def _listing(folder: str) -> List[str]:
    return call_with_timeout(lambda: sorted(os.listdir(folder)), LIST_SECONDS, f"listing {folder}")


Located = List[Tuple[str, Optional[int]]]  # (file, the rank its name ends in)


def expand_sources(sources: Sequence[str], max_files: int = MAX_FILES) -> Tuple[Located, List[str]]:
    """The files the sources name, and the errors."""
    found: Located = []
    errors: List[str] = []
    for source in sources:
        try:
            files, problem = _expand(str(source))
        except CallTimedOut as exc:
            files, problem = [], f"could not read {source}: {exc} (is it on a hung mount?)"
        except OSError as exc:
            files, problem = [], f"could not read {source}: {exc.strerror or exc}"
        if problem:
            errors.append(problem)
        for item in files:
            if len(found) >= max_files:
                errors.append(f"more than {max_files} dump files: read the first {max_files}")
                return found, errors
            if item[0] not in (f for f, _ in found):
                found.append(item)
    return found, errors


def _expand(source: str) -> Tuple[Located, Optional[str]]:
    try:
        is_dir = call_with_timeout(lambda: os.path.isdir(source), LIST_SECONDS, f"looking at {source}")
        exists = is_dir or call_with_timeout(lambda: os.path.lexists(source), LIST_SECONDS, f"looking at {source}")
    except ValueError:  # a NUL byte in the path
        return [], f"could not read {source!r}: not a valid path"
    if is_dir:
        names = [n for n in _listing(source) if _RANK_SUFFIX.search(n)]
        # a dump is a file: a folder beside the dumps ("run_2/") is no rank's dump
        names = call_with_timeout(
            lambda: [n for n in names if not os.path.isdir(os.path.join(source, n))], LIST_SECONDS, f"listing {source}"
        )
        files = [(os.path.join(source, n), rank_from_name(n)) for n in names]
        if not files:
            return [], f"could not read {source}: no file in it ends in a rank number (<prefix><rank>)"
        return sorted(files, key=lambda f: (f[1], f[0])), None
    if exists:
        return [(source, rank_from_name(source))], None
    folder, prefix = os.path.split(source)
    has_folder = call_with_timeout(lambda: os.path.isdir(folder or "."), LIST_SECONDS, f"looking at {folder}")
    if not prefix or not has_folder:
        return [], f"could not read {source}: no such file, folder or prefix; {EXPECTED}"
    names = [n for n in _listing(folder or ".") if n.startswith(prefix)]
    files = [(os.path.join(folder, n), rank_from_name(n, prefix)) for n in names]
    if not files:
        return [], f"could not read {source}: no file starts with {prefix} in {folder or '.'}; {EXPECTED}"
    return sorted(files, key=lambda f: (f[1] is None, f[1] or 0, f[0])), None


def read_flight_recorder(
    sources: Sequence[str],
    max_files: int = MAX_FILES,
    max_bytes: int = MAX_FILE_BYTES,
    seconds: float = READ_SECONDS,
) -> FrDumps:
    """Every dump the sources name; what could not be read is in `errors`, one line each."""
    files, errors = expand_sources(sources, max_files)
    result = FrDumps(errors=errors)
    for path, rank in files:
        dump, problem = read_dump_file(path, rank, max_bytes, seconds)
        if dump is None:
            result.errors.append(problem)
            continue
        if dump.rank is None:
            result.errors.append(f"could not tell the rank of {path}: name it <prefix><rank>")
        result.dumps.append(dump)
    return result


def _positive(value: Optional[str]) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return 0


def dump_locations(env: Mapping[str, str], rank: Optional[int] = None) -> Dict[str, Any]:
    """Where a job with environment `env` has its FR dumps written, from the variables torch reads:
    {enabled, buffer_size, prefix, prefix_from, file, pipe}. `file` and `pipe` need the rank
    (`rank`, else the job's RANK); `pipe` is the FIFO that makes ProcessGroupNCCL dump when
    written to (<TORCH_NCCL_DEBUG_INFO_PIPE_FILE><rank>.pipe), None where the job set none."""
    size_var = next((v for v in BUFFER_VARS if env.get(v, "").strip()), None)
    buffer_size = _positive(env.get(size_var)) if size_var else 0
    prefix_var = next((v for v in DUMP_FILE_VARS if env.get(v)), None)
    prefix = env[prefix_var] if prefix_var else DEFAULT_PREFIX
    if rank is None and str(env.get("RANK", "")).strip().isdigit():
        rank = int(env["RANK"])
    pipe_stem = env.get(PIPE_VAR) or None
    return {
        "enabled": buffer_size > 0,
        "buffer_size": buffer_size,
        "buffer_from": size_var,
        "prefix": prefix,
        "prefix_from": prefix_var or "default",
        "rank": rank,
        "file": f"{prefix}{rank}" if rank is not None else None,
        "pipe": f"{pipe_stem}{rank}.pipe" if pipe_stem and rank is not None and buffer_size > 0 else None,
    }
