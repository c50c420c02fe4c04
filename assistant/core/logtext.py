"""A log's text as evidence: its lines (binary-safe, any encoding, tqdm redraws split) and the
progress they show (the last step/epoch counter, the step interval, the last timestamp). Pure: the
bytes are read by the caller (debug_stuck.probes.collectors.logtail)."""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import List, Optional

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

# tqdm: " 45%|████▌     | 450/1000 [01:23<01:40,  5.43it/s, loss=0.1]"
_TQDM = re.compile(
    r"(?P<n>\d+)/(?P<total>\d+)\s*\[(?P<elapsed>[0-9:]+)<(?P<left>[0-9:?]+),\s*"
    r"(?P<rate>[0-9.]+|\?)\s*(?P<unit>it/s|s/it)"
)
_STEP = re.compile(
    r"(?i)\b(?:global[_ ]?)?(?:step|iter(?:ation)?|batch)\b\s*[:=#]?\s*(?P<n>\d[\d,]*)"
    r"(?:\s*(?:/|of)\s*(?P<total>\d[\d,]*))?"
)
_EPOCH = re.compile(r"(?i)\bepoch\b\s*[:=#]?\s*(?P<n>\d+)\s*(?:/|of)\s*(?P<total>\d+)")
_ISO_TS = re.compile(r"(?P<d>\d{4}-\d{2}-\d{2})[ T](?P<t>\d{2}:\d{2}:\d{2})(?:[.,](?P<f>\d+))?")
_UNIX_TS = re.compile(r"\[(?P<ts>1[5-9]\d{8}(?:\.\d+)?)\]")
_CLOCK_TS = re.compile(r"\[(?P<t>\d{2}:\d{2}:\d{2})\]")


@dataclass
class Progress:
    last_step: Optional[int] = None
    total_steps: Optional[int] = None
    last_epoch: Optional[int] = None
    total_epochs: Optional[int] = None
    step_line: Optional[str] = None
    steps_seen: int = 0
    seconds_per_step: Optional[float] = None  # the run's rhythm: median seconds per step in the tail
    recent_seconds_per_step: Optional[float] = None  # over the last few steps only
    last_step_epoch: Optional[float] = None  # when the last step line was written (timestamped logs)
    last_timestamp: Optional[str] = None
    last_timestamp_epoch: Optional[float] = None

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class LogTail:
    path: str
    size: int = 0
    mtime: Optional[float] = None
    start_offset: int = 0
    encoding: str = "utf-8"
    lines: List[str] = field(default_factory=list)
    # 1-based line number (in the text read) of each entry of `lines`; tqdm redraws split on
    # carriage returns share the number of their line.
    line_numbers: List[int] = field(default_factory=list)
    error: Optional[str] = None
    progress: Progress = field(default_factory=Progress)
    read_path: Optional[str] = None  # /proc/P/fd/N when the job's own open file was read

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def whole_file(self) -> bool:
        return self.start_offset == 0

    def seconds_since_modified(self, now: Optional[float] = None) -> Optional[float]:
        if self.mtime is None:
            return None
        return max(0.0, (now or time.time()) - self.mtime)

    def to_dict(self) -> dict:
        out = {
            "path": self.path,
            "size": self.size,
            "bytes_read": self.size - self.start_offset,
            "encoding": self.encoding,
            "lines": len(self.lines),
            "progress": self.progress.to_dict(),
        }
        age = self.seconds_since_modified()
        if age is not None:
            out["seconds_since_modified"] = round(age, 1)
        if self.read_path:
            out["read_from"] = self.read_path
        if self.error:
            out["error"] = self.error
        return out


def fill_tail(tail: LogTail, raw: bytes, bom: bytes, cut: bool) -> LogTail:
    """The tail's lines and progress from the bytes read (`cut`: the first line is partial)."""
    text, encoding, problem = decode(raw, bom)
    tail.encoding = encoding
    if problem:
        tail.error = f"log {tail.path}: {problem}"
        return tail
    physical = text.replace("\r\n", "\n").split("\n")
    if cut and physical:
        physical = physical[1:]  # the first line is cut in the middle
    for number, line in enumerate(physical, start=1):
        for segment in line.split("\r"):
            segment = _ANSI.sub("", segment).rstrip()
            if segment.strip():
                tail.lines.append(segment)
                tail.line_numbers.append(number)
    tail.progress = parse_progress(tail.lines)
    return tail


def decode(raw: bytes, bom: bytes):
    """Return (text, encoding, problem). Binary content is a problem, not an exception."""
    if bom[:2] == b"\xff\xfe":
        return raw.decode("utf-16-le", errors="replace").lstrip("\ufeff"), "utf-16-le", None
    if bom[:2] == b"\xfe\xff":
        return raw.decode("utf-16-be", errors="replace").lstrip("\ufeff"), "utf-16-be", None
    # Sparse holes and preallocated logs are runs of NUL bytes: not content.
    body = raw.replace(b"\x00", b"")
    if not body.strip():
        if raw:
            return "", "utf-8", f"holds no text in its last {len(raw)} bytes (only NUL bytes)"
        return "", "utf-8", None
    text = body.decode("utf-8", errors="replace")
    sample = text[:65536]
    odd = sum(1 for ch in sample if ch == "\ufffd" or (ord(ch) < 32 and ch not in "\t\n\r\x1b\x0c"))
    if odd > max(8, len(sample) // 10):
        return (
            "",
            "binary",
            (
                f"looks binary ({100 * odd // max(1, len(sample))}% undecodable or control bytes in its tail); "
                "give the text log the job writes"
            ),
        )
    return text, "utf-8", None


def _int(text: Optional[str]) -> Optional[int]:
    return int(text.replace(",", "")) if text else None


def _timestamp(line: str):
    """Return (raw, epoch seconds or None) for the timestamp in a line, if any."""
    m = _ISO_TS.search(line)
    if m:
        raw = f"{m['d']} {m['t']}"
        try:
            epoch = datetime.strptime(raw, "%Y-%m-%d %H:%M:%S").timestamp()
        except ValueError:
            return raw, None
        return raw, epoch + (float("0." + m["f"]) if m["f"] else 0.0)
    m = _UNIX_TS.search(line)
    if m:
        return m["ts"], float(m["ts"])
    m = _CLOCK_TS.search(line)
    if m:
        return m["t"], None
    return None, None


def parse_progress(lines: List[str]) -> Progress:
    prog = Progress()
    stamped_steps = []  # (epoch seconds, step)
    rates = []
    for line in lines:
        raw_ts, ts = _timestamp(line)
        if raw_ts:
            prog.last_timestamp, prog.last_timestamp_epoch = raw_ts, ts
        step = total = None
        m = _TQDM.search(line)
        if m:
            step, total = int(m["n"]), int(m["total"])
            if m["rate"] != "?" and float(m["rate"]) > 0:
                rate = float(m["rate"])
                rates.append(1.0 / rate if m["unit"] == "it/s" else rate)
        else:
            m = _STEP.search(line)
            if m:
                step, total = _int(m["n"]), _int(m["total"])
        e = _EPOCH.search(line)
        if e:
            prog.last_epoch, prog.total_epochs = int(e["n"]), int(e["total"])
        if step is not None:
            prog.last_step, prog.step_line = step, line.strip()[:300]
            if total:
                prog.total_steps = total
            prog.steps_seen += 1
            if ts is not None:
                stamped_steps.append((ts, step))
                prog.last_step_epoch = ts
    if rates:
        prog.seconds_per_step = round(statistics.median(rates[-20:]), 4)
    elif len(stamped_steps) >= 2:
        gaps = [
            (t2 - t1) / (s2 - s1)
            for (t1, s1), (t2, s2) in zip(stamped_steps, stamped_steps[1:])
            if s2 > s1 and t2 >= t1
        ]
        if gaps:
            prog.seconds_per_step = round(statistics.median(gaps[-50:]), 4)
            prog.recent_seconds_per_step = round(statistics.median(gaps[-3:]), 4)
    return prog
