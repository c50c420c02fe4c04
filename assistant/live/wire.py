"""A Snapshot as compact JSON for the wire, and back, for collecting evidence from many nodes.

`snapshot_to_wire(snap)` is what `debug-stuck snapshot --format json` prints; `snapshot_from_wire`
rebuilds the same objects (ProcInfo, StackSeries, StackDump, ThreadStack, Frame, GpuSnapshot,
KernelLog) so that observe, group_ranks, find_culprit and fill_live work on a remote snapshot as on
a local one.

Small on the wire: the ranks of a job mostly sit in the same few stacks, and a frozen thread has
the same stack in every sample, so each distinct frame is stored once in `frames` and each
distinct thread stack once in `stacks` (a list of frame indices); a thread refers to its stack by
index. Empty and default values are left out. Of the kernel log only the lines the report uses
travel: the last KERNEL_TAIL lines and every line that matters for a hang.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional, Tuple

from debug_stuck.live.collect import LogGrowth, Snapshot
from debug_stuck.probes.collectors.procs import ProcInfo
from debug_stuck.redact import redact_obj

WIRE_FORMAT = "debug-stuck-snapshot"
WIRE_VERSION = 1
KERNEL_TAIL = 50  # the report shows the last 50 kernel lines (debug_stuck.live.assess.fill_live)

_PROC_FIELDS = {f.name: f for f in dataclasses.fields(ProcInfo)}
_INT_KEYED = ("thread_wchans", "thread_kernel_stacks", "waits", "thread_demand")


class WireError(ValueError):
    """The text is not a snapshot this version can read."""


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def _proc_to_wire(info: ProcInfo) -> dict:
    out: Dict[str, Any] = {}
    for name, f in _PROC_FIELDS.items():
        value = getattr(info, name)
        if name in ("pid", "ppid", "name", "cmdline") or value != _default(f):
            out[name] = {str(k): v for k, v in value.items()} if name in _INT_KEYED else value
    return out


def _proc_from_wire(data: dict) -> ProcInfo:
    known = {k: v for k, v in data.items() if k in _PROC_FIELDS}
    for name in _INT_KEYED:
        if name in known:
            known[name] = {int(k): v for k, v in known[name].items()}
    known["cmdline"] = list(known.get("cmdline") or [])
    return ProcInfo(**known)


def _stacks_to_wire(stacks: dict) -> Tuple[list, list, list]:
    frame_index: Dict[tuple, int] = {}
    stack_index: Dict[tuple, int] = {}
    frames: list = []
    table: list = []
    series_out: list = []
    for pid, series in stacks.items():
        dumps = []
        for dump in series.dumps:
            threads = []
            for thread in dump.threads:
                ids = []
                for frame in thread.frames:
                    path = frame.path if frame.path and frame.path != frame.file else None
                    key = (frame.function, frame.file, frame.line, bool(frame.native), path, frame.module)
                    idx = frame_index.get(key)
                    if idx is None:
                        idx = frame_index[key] = len(frames)
                        row = [frame.function, frame.file, frame.line, 1 if frame.native else 0]
                        if path or frame.module:
                            row.append(path)  # a fifth element, so readers of four-element rows still work
                        if frame.module:
                            row.append(frame.module)  # a sixth: a native frame's shared object
                        frames.append(row)
                    ids.append(idx)
                skey = tuple(ids)
                sidx = stack_index.get(skey)
                if sidx is None:
                    sidx = stack_index[skey] = len(table)
                    table.append(ids)
                row = [thread.tid, thread.name, thread.state, sidx]
                if thread.holds_gil:
                    row.append(1)  # a fifth element, so readers of four-element rows still work
                threads.append(row)
            entry = {"tool": dump.tool, "seconds": round(dump.seconds, 3), "threads": threads}
            if dump.error:
                entry["error"] = dump.error
            if dump.notes:
                entry["notes"] = list(dump.notes)
            dumps.append(entry)
        item: Dict[str, Any] = {"pid": int(pid), "dumps": dumps}
        if series.error:
            item["error"] = series.error
        if series.error_kind:
            item["error_kind"] = series.error_kind
        series_out.append(item)
    return frames, table, series_out


def _stacks_from_wire(frames_in: list, table: list, series_in: list) -> dict:
    from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

    frames = [
        Frame(
            function=f[0],
            file=f[1],
            line=f[2],
            native=bool(f[3]),
            path=f[4] if len(f) > 4 else None,
            module=f[5] if len(f) > 5 else None,
        )
        for f in frames_in
    ]
    stacks = [[frames[i] for i in ids] for ids in table]
    out = {}
    for item in series_in:
        pid = int(item["pid"])
        dumps = []
        for d in item.get("dumps") or []:
            threads = [
                ThreadStack(
                    tid=int(t[0]), name=t[1], state=t[2], frames=list(stacks[t[3]]), holds_gil=len(t) > 4 and bool(t[4])
                )
                for t in d["threads"]
            ]
            dumps.append(
                StackDump(
                    pid=pid,
                    threads=threads,
                    tool=d.get("tool", "?"),
                    seconds=float(d.get("seconds") or 0.0),
                    error=d.get("error"),
                    notes=list(d.get("notes") or []),
                )
            )
        out[pid] = StackSeries(pid=pid, dumps=dumps, error=item.get("error"), error_kind=item.get("error_kind"))
    return out


def _dataclass_fields(cls, data: dict) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _gpus_to_wire(gpus) -> Optional[dict]:
    if gpus is None:
        return None
    out = {
        "vendor": gpus.vendor,
        "available": gpus.available,
        "devices": [{k: v for k, v in dataclasses.asdict(d).items() if v is not None} for d in gpus.devices],
        "processes": [dataclasses.asdict(p) for p in gpus.processes],
    }
    for key in ("note", "errors", "source", "elapsed_s"):
        value = getattr(gpus, key)
        if value:
            out[key] = value
    return out


def _gpus_from_wire(data: Optional[dict]):
    if data is None:
        return None
    from debug_stuck.probes.collectors.gpu.model import GpuDevice, GpuProcess, GpuSnapshot

    devices = []
    for d in data.get("devices") or []:
        fields = _dataclass_fields(GpuDevice, d)
        # None means "unknown" for the throttle reasons; absent from the wire means None here.
        fields.setdefault("throttle", None)
        devices.append(GpuDevice(**fields))
    return GpuSnapshot(
        vendor=data.get("vendor"),
        devices=devices,
        processes=[GpuProcess(**_dataclass_fields(GpuProcess, p)) for p in data.get("processes") or []],
        available=bool(data.get("available")),
        note=data.get("note"),
        errors=list(data.get("errors") or []),
        source=data.get("source"),
        elapsed_s=data.get("elapsed_s"),
    )


def _kernel_to_wire(kernel) -> Optional[dict]:
    if kernel is None:
        return None
    from debug_stuck.probes.collectors.kernel import classify

    lines = kernel.lines
    first_tail = len(lines) - KERNEL_TAIL
    kept, flagged = [], []
    for i, line in enumerate(lines):
        matters = classify(line) is not None
        if matters or i >= first_tail:
            if matters:
                flagged.append(len(kept))
            kept.append(line)
    # Which lines matter travels too: the node reads its own log, the collector of 1,000 nodes
    # need not run every kernel pattern over every node's lines again.
    out: Dict[str, Any] = {"lines": kept, "interesting": flagged}
    for key in ("source", "error", "notes", "boot_time"):
        value = getattr(kernel, key, None)
        if value:
            out[key] = value
    return out


def kernel_interesting(data: dict) -> Optional[list]:
    """The kernel lines that matter, as the node that sent `data` flagged them (None: not flagged)."""
    kernel = data.get("kernel")
    if not isinstance(kernel, dict) or not isinstance(kernel.get("interesting"), list):
        return None
    lines = kernel.get("lines") or []
    return [lines[i] for i in kernel["interesting"] if isinstance(i, int) and 0 <= i < len(lines)]


def _kernel_from_wire(data: Optional[dict]):
    if data is None:
        return None
    from debug_stuck.probes.collectors.kernel import KernelLog

    return KernelLog(
        lines=list(data.get("lines") or []),
        source=data.get("source"),
        error=data.get("error"),
        notes=list(data.get("notes") or []),
        boot_time=data.get("boot_time"),
    )


def _log_to_wire(lg: LogGrowth) -> list:
    row = [lg.path, lg.size_before, lg.size_after]
    if lg.read_path or lg.role != "log" or lg.repeated_error:
        row += [lg.read_path, lg.role]  # later elements, so readers of three-element rows still work
    if lg.repeated_error:
        row.append(lg.repeated_error)
    return row


def snapshot_to_wire(snap: Snapshot, **extra: Any) -> dict:
    """The compact, JSON-ready form of a snapshot; `extra` keys (node, node_id, job) ride along."""
    frames, table, series = _stacks_to_wire(snap.stacks)
    out: Dict[str, Any] = {
        "format": WIRE_FORMAT,
        "version": WIRE_VERSION,
        "host": snap.host,
        "taken_at": round(snap.taken_at, 3),
        "window": snap.window,
        "processes": [_proc_to_wire(p) for p in snap.processes],
        "frames": frames,
        "stacks": table,
        "series": series,
        "gpus": _gpus_to_wire(snap.gpus),
        "kernel": _kernel_to_wire(snap.kernel),
        "shm": snap.shm,
        "logs": [_log_to_wire(lg) for lg in snap.logs],
        "errors": list(snap.errors),
        "notes": list(snap.notes),
        "missing": [dict(m) for m in snap.missing],
        "heartbeats": {str(pid): dict(beat) for pid, beat in snap.heartbeats.items()},
        "nfs_servers": list(snap.nfs_servers),
    }
    for key, value in extra.items():
        if value is not None:
            out[key] = value
    return redact_obj(out)  # the wire leaves this machine: no secret rides along


def error_to_wire(message: str, exit_code: int, **extra: Any) -> dict:
    """What a node sends when it has no snapshot to give (no process of the job there, say)."""
    out = {"format": WIRE_FORMAT, "version": WIRE_VERSION, "error": message, "exit_code": exit_code}
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def check_wire(data: Any) -> dict:
    if not isinstance(data, dict) or data.get("format") != WIRE_FORMAT:
        raise WireError("not a debug-stuck snapshot")
    version = data.get("version")
    if not isinstance(version, int) or version > WIRE_VERSION:
        raise WireError(f"snapshot format version {version!r} is newer than this debug-stuck reads ({WIRE_VERSION})")
    return data


def snapshot_from_wire(data: dict) -> Snapshot:
    """Rebuild the Snapshot; raises WireError for something that is not one (or an error record)."""
    check_wire(data)
    if "error" in data and "processes" not in data:
        raise WireError(f"the node sent no snapshot: {data['error']}")
    try:
        return Snapshot(
            host=str(data.get("host") or "?"),
            taken_at=float(data.get("taken_at") or 0.0),
            window=float(data.get("window") or 0.0),
            processes=[_proc_from_wire(p) for p in data.get("processes") or []],
            stacks=_stacks_from_wire(data.get("frames") or [], data.get("stacks") or [], data.get("series") or []),
            gpus=_gpus_from_wire(data.get("gpus")),
            kernel=_kernel_from_wire(data.get("kernel")),
            shm=data.get("shm"),
            logs=[LogGrowth(*entry[:6]) for entry in data.get("logs") or []],
            errors=list(data.get("errors") or []),
            notes=list(data.get("notes") or []),
            missing=[dict(m) for m in data.get("missing") or [] if isinstance(m, dict)],
            heartbeats={int(k): dict(v) for k, v in (data.get("heartbeats") or {}).items() if isinstance(v, dict)},
            nfs_servers=[str(s) for s in data.get("nfs_servers") or []],
        )
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise WireError(f"malformed snapshot: {type(exc).__name__}: {exc}") from None


def thread_count(snap: Snapshot) -> int:
    """Thread stacks in the snapshot, every sample counted (what the stack table deduplicates)."""
    return sum(len(d.threads) for s in snap.stacks.values() for d in s.dumps)


def distinct_stacks(wire: dict) -> int:
    return len(wire.get("stacks") or [])
