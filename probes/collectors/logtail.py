"""Read the tail of a training log: bounded in bytes and time, binary-safe, any encoding.

Besides the lines themselves it extracts progress: the last step/epoch counter seen, the step
interval, the last timestamp, and how long ago the file last changed.
"""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import List, Optional

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.inputs import InputError, open_input, read_span

DEFAULT_TAIL_BYTES = 256 * 1024
LOG_EXPECTED = "give the job's log file"
DEFAULT_READ_SECONDS = 5.0

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


def read_log_tail(
    path: str,
    max_bytes: int = DEFAULT_TAIL_BYTES,
    timeout: float = DEFAULT_READ_SECONDS,
    read_path: Optional[str] = None,
) -> LogTail:
    """Read and parse the last `max_bytes` of `path`. Never raises: problems land in `.error`.
    `read_path` (/proc/P/fd/N) reads the file a job holds open, reported under its own `path`."""
    tail = LogTail(path=path, read_path=read_path)
    try:
        raw, size, mtime, offset, bom, cut = call_with_timeout(
            lambda: _read_raw(read_path or path, max_bytes), timeout, what=f"reading {path}"
        )
    except CallTimedOut as exc:
        tail.error = f"log {path}: {exc} (is it on a hung network mount?)"
        return tail
    except InputError as exc:
        tail.error = exc.naming(path)
        return tail
    except OSError as exc:
        tail.error = f"log {path}: cannot read: {exc.strerror or exc}"
        return tail
    tail.size, tail.mtime, tail.start_offset = size, mtime, offset
    text, encoding, problem = _decode(raw, bom, seeked=offset > 0)
    tail.encoding = encoding
    if problem:
        tail.error = f"log {path}: {problem}"
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


def _read_raw(path: str, max_bytes: int):
    with open_input(path, "log", LOG_EXPECTED) as (fd, st):
        bom = read_span(fd, 0, 4)
        offset = max(0, st.st_size - max_bytes)
        if bom[:2] in (b"\xff\xfe", b"\xfe\xff") and offset % 2:
            offset += 1
        # The first line read is partial unless a newline (or a sparse hole) precedes it.
        cut = offset > 0 and read_span(fd, offset - 1, 1) not in (b"\n", b"\x00")
        raw = read_span(fd, offset, st.st_size - offset)
    return raw, st.st_size, st.st_mtime, offset, bom, cut


def _decode(raw: bytes, bom: bytes, seeked: bool):
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
