"""One shape for every Flight Recorder (FR) dump format torch has shipped. Pure: no I/O.

A dump is what a rank's FR writes (NCCL at a watchdog timeout, `_dump_fr_trace()`, the debug
server's fr_trace_json), as plain data after pickle or JSON decoding. The `version` field says
which fields exist (read from torch's TraceUtils/FlightRecorder source):

- 1.x (torch 2.2-2.3): `seq_id` (one counter for collectives and p2p), `pg_id`; 1.1 has no
  `record_id` nor `pg_config`; 1.4 adds `record_id`, `op_id` and `pg_config` as {pg_id: [ranks]}.
- 2.0-2.2: `seq_id` split into `collective_seq_id` and `p2p_seq_id`, with `is_p2p`, `op_id`,
  `process_group` (name, desc) and dtypes; `pg_config` becomes {name: {name, desc, ranks: "[0, 1]"}}.
- 2.3: `pg_status` {pg_id: last enqueued/started/completed collective}.
- 2.4 ... 2.10 (torch 2.13 writes 2.10): `nccl_version`, then `comm_lib_version`, thread
  fields, `timeout_ms`; fields were added, none renamed.

The JSON form (`_dump_fr_trace_json`) differs from the pickle: lists for tuples, pg_status values
as strings, 0 where the pickle has None for the discovery times. Gloo's FR keeps no CUDA events:
its entries stay "scheduled" and `retired` marks a finished one; its pg_config is a placeholder
(key "") that says nothing about membership.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

KNOWN_MAJORS = (1, 2)
MAX_ENTRIES = 100_000  # per dump; torch's ring buffer default is 2000
MAX_FRAMES = 64  # per entry; the call site is near the top
MAX_TENSORS = 256  # sizes and dtypes kept per entry: a crafted dump cannot make the walk explode
MAX_DIMS = 16
_P2P_WORDS = ("send", "recv")


def version_tuple(version: Any) -> Tuple[int, int]:
    """ "2.10" -> (2, 10); anything unreadable -> (0, 0)."""
    try:
        major, minor = str(version).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, TypeError):
        return 0, 0


def normalize_dump(raw: Any) -> Dict[str, Any]:
    """The dump as {version, entries, pg_config, pg_status, notes[, rank, comm_lib_version]}, every entry with the
    same keys whatever the format version. Raises ValueError when it is no FR dump at all."""
    if not isinstance(raw, dict):
        raise ValueError(f"not a Flight Recorder dump: a {type(raw).__name__}, not a dict")
    if raw.get("_normalized"):
        return raw
    if "entries" not in raw and "version" not in raw:
        raise ValueError("not a Flight Recorder dump: no 'entries' nor 'version' key")
    version = str(raw.get("version", ""))
    notes: List[str] = []
    major, _ = version_tuple(version)
    if major not in KNOWN_MAJORS:
        notes.append(f"format version {version or 'missing'} is not one this reader knows (1.x, 2.x): read as 2.x")
    entries_raw = raw.get("entries") or []
    if not isinstance(entries_raw, list):
        raise ValueError("not a Flight Recorder dump: 'entries' is not a list")
    if len(entries_raw) > MAX_ENTRIES:
        notes.append(f"only the last {MAX_ENTRIES} of {len(entries_raw)} entries were read")
        entries_raw = entries_raw[-MAX_ENTRIES:]
    entries = [_entry(e, i) for i, e in enumerate(entries_raw) if isinstance(e, dict)]
    out = {
        "_normalized": True,
        "version": version,
        "entries": entries,
        "pg_config": _pg_config(raw.get("pg_config")),
        "pg_status": _pg_status(raw.get("pg_status")),
        "notes": notes,
    }
    if isinstance(raw.get("rank"), int):
        out["rank"] = raw["rank"]
    library = raw.get("comm_lib_version") or raw.get("nccl_version")  # the newer key, then torch <2.5's
    if isinstance(library, str) and library:
        out["comm_lib_version"] = library[:40]
    return out


def _int(value: Any, default: Optional[int] = None) -> Optional[int]:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default


def _time(value: Any) -> Optional[int]:
    number = _int(value)
    return number if number else None  # the JSON form writes 0 for "not yet"


def _sizes(value: Any) -> List[List[int]]:
    if not isinstance(value, (list, tuple)):
        return []
    return [
        [_int(d, 0) for d in dims[:MAX_DIMS]] if isinstance(dims, (list, tuple)) else [] for dims in value[:MAX_TENSORS]
    ]


def _strings(value: Any) -> List[str]:
    return [str(v)[:64] for v in value[:MAX_TENSORS]] if isinstance(value, (list, tuple)) else []


def _frames(value: Any) -> List[Dict[str, Any]]:
    frames = []
    for frame in value[: MAX_FRAMES * 4] if isinstance(value, (list, tuple)) else []:
        if isinstance(frame, dict):
            frames.append(
                {
                    "name": str(frame.get("name", "")),
                    "filename": str(frame.get("filename", "")),
                    "line": _int(frame.get("line"), 0),
                }
            )
        if len(frames) >= MAX_FRAMES:
            break
    return frames


def _entry(e: Dict[str, Any], index: int) -> Dict[str, Any]:
    name = str(e.get("profiling_name", ""))
    group = e.get("process_group")
    if isinstance(group, (list, tuple)) and group:
        pg_name = str(group[0])
        pg_desc = str(group[1]) if len(group) > 1 else ""
    else:  # 1.x: only the numeric pg_id
        pg_name, pg_desc = str(e.get("pg_id", "")), ""
    op = name.split(":", 1)[-1]
    is_p2p = e.get("is_p2p")
    if is_p2p is None:
        is_p2p = op.split(" ")[0] in _P2P_WORDS
    if "collective_seq_id" in e:
        collective_seq, p2p_seq = _int(e.get("collective_seq_id"), 0), _int(e.get("p2p_seq_id"), 0)
    else:  # 1.x: one seq_id for both kinds
        seq = _int(e.get("seq_id"), 0)
        collective_seq, p2p_seq = (0, seq) if is_p2p else (seq, 0)
    return {
        "record_id": _int(e.get("record_id"), index),
        "pg_id": str(e.get("pg_id", pg_name)),
        "pg_name": pg_name,
        "pg_desc": pg_desc,
        "collective_seq_id": collective_seq,
        "p2p_seq_id": p2p_seq,
        "is_p2p": bool(is_p2p),
        "op_id": _int(e.get("op_id")),
        "profiling_name": name,
        "input_sizes": _sizes(e.get("input_sizes")),
        "output_sizes": _sizes(e.get("output_sizes")),
        "input_dtypes": _strings(e.get("input_dtypes")),
        "output_dtypes": _strings(e.get("output_dtypes")),
        "state": str(e.get("state", "")),
        "retired": bool(e.get("retired", False)),
        "time_created_ns": _int(e.get("time_created_ns"), 0),
        "time_discovered_started_ns": _time(e.get("time_discovered_started_ns")),
        "time_discovered_completed_ns": _time(e.get("time_discovered_completed_ns")),
        "timeout_ms": _int(e.get("timeout_ms")),
        "frames": _frames(e.get("frames")),
    }


def _ranks(value: Any) -> List[int]:
    if isinstance(value, str):
        try:
            value = json.loads(value)  # "[0, 1]": never eval'd
        except ValueError:
            return []
    if not isinstance(value, (list, tuple)):
        return []
    return [r for r in (_int(v) for v in value) if r is not None]


def _pg_config(value: Any) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    if not isinstance(value, dict):
        return out
    for key, conf in value.items():
        if isinstance(conf, dict):  # 2.x: {name: {name, desc, ranks}}
            name = str(conf.get("name", key))
            if not name:
                continue  # gloo's placeholder
            out[name] = {"desc": str(conf.get("desc", "")), "ranks": _ranks(conf.get("ranks"))}
        else:  # 1.4: {pg_id: [ranks]}
            out[str(key)] = {"desc": "", "ranks": _ranks(conf)}
    return out


def _pg_status(value: Any) -> Dict[str, Dict[str, int]]:
    out: Dict[str, Dict[str, int]] = {}
    if not isinstance(value, dict):
        return out
    for pg_id, status in value.items():
        if not isinstance(status, dict):
            continue
        out[str(pg_id)] = {str(k): n for k, n in ((k, _int(v)) for k, v in status.items()) if n is not None}
    return out
