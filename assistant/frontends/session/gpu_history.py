"""GPU utilization and power over the session, for the sparklines and for "0% for 40 s"."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Deque, Dict, List, Optional, Sequence, Tuple

from debug_stuck.render.text import format_duration

GPU_IDLE_UTIL = 5.0  # the same threshold as debug_stuck.live.observe: below it a GPU counts as idle
GPU_HISTORY_READINGS = 120
LOW_POWER_RATIO = 1 / 3  # the tree's `power` question: "under about a third of the limit" is low


@dataclass
class GpuReading:
    at: float
    util: Dict[int, Optional[float]]
    power_w: Dict[int, Optional[float]]
    power_limit_w: Dict[int, Optional[float]]


class GpuHistory:
    """GPU utilization and power readings, for the sparklines and for "0% for 40 s"."""

    def __init__(self, maxlen: int = GPU_HISTORY_READINGS):
        self.readings: Deque[GpuReading] = deque(maxlen=maxlen)
        self.available: Optional[bool] = None  # None: not read yet
        self.note: Optional[str] = None
        self.vendor: Optional[str] = None

    def add_snapshot(self, snapshot, at: Optional[float] = None) -> bool:
        """Record a debug_stuck.probes.collectors.gpu.GpuSnapshot; True when it held a reading."""
        if snapshot is None:
            return False
        if not snapshot.available:
            if self.available is None:
                self.available = False
                self.note = snapshot.note or "no GPU found"
            return False
        self.vendor = snapshot.vendor
        return self.add_devices([d.to_dict() for d in snapshot.devices], at)

    def add_devices(self, devices: List[dict], at: Optional[float] = None) -> bool:
        """Record GPU devices as a report lists them (report.gpus)."""
        if not devices:
            return False
        self.available = True
        self.readings.append(
            GpuReading(
                at=time.time() if at is None else at,
                util={d["index"]: d.get("util") for d in devices},
                power_w={d["index"]: d.get("power_w") for d in devices},
                power_limit_w={d["index"]: d.get("power_limit_w") for d in devices},
            )
        )
        return True

    def indices(self) -> List[int]:
        return sorted({i for r in self.readings for i in r.util})

    def util_series(self, index: int) -> List[float]:
        return [r.util[index] for r in self.readings if r.util.get(index) is not None]

    def power_series(self, index: int) -> List[float]:
        return [r.power_w[index] for r in self.readings if r.power_w.get(index) is not None]

    def latest(self) -> Optional[GpuReading]:
        return self.readings[-1] if self.readings else None

    def describe_util(self, indices: Optional[Sequence[int]] = None) -> Optional[Tuple[str, str]]:
        """("idle"|"busy", one sentence) from the readings of these GPUs (default: all), or None."""
        wanted = list(indices) if indices else self.indices()
        rows = [[r.util.get(i) for i in wanted] for r in self.readings]
        rows = [row for row in rows if row and all(u is not None for u in row)]
        if not rows:
            return None
        last = rows[-1]
        busy_now = max(last) >= GPU_IDLE_UTIL
        value = "busy" if busy_now else "idle"
        # How long the GPUs have looked like this: walk back while every reading agrees.
        readings = [r for r in self.readings if all(r.util.get(i) is not None for i in wanted)]
        first = readings[-1]
        for reading in reversed(readings):
            if (max(reading.util[i] for i in wanted) >= GPU_IDLE_UTIL) != busy_now:
                break
            first = reading
        span = readings[-1].at - first.at
        where = f"on all {len(wanted)} GPUs" if len(wanted) > 1 else f"on GPU {wanted[0]}"
        if busy_now:
            lo, hi = min(last), max(last)
            level = f"{hi:.0f}%" if lo == hi else f"{lo:.0f}-{hi:.0f}%"
            if lo < GPU_IDLE_UTIL:
                where = "on GPU " + ",".join(str(i) for i, u in zip(wanted, last) if u >= GPU_IDLE_UTIL)
                level = f"{hi:.0f}%"
            what = f"GPU util is {level} {where}" if span < 1 else f"GPU util has been {level} {where}"
        else:
            what = f"GPU util is 0% {where}" if span < 1 else f"GPU util has been 0% {where}"
        if span >= 1:
            what += f" for {format_duration(span)}"
        return value, what

    def describe_power(self, indices: Optional[Sequence[int]] = None) -> Optional[Tuple[str, str]]:
        """("low"|"high", one sentence): power draw against the limit in the latest reading."""
        latest = self.latest()
        if latest is None:
            return None
        wanted = list(indices) if indices else self.indices()
        pairs = [(latest.power_w.get(i), latest.power_limit_w.get(i)) for i in wanted]
        pairs = [(w, lim) for w, lim in pairs if w is not None and lim]
        if not pairs:
            return None
        top = max(w / lim for w, lim in pairs)
        value = "low" if top < LOW_POWER_RATIO else "high"
        watts = ", ".join(f"{w:.0f} W" for w, _ in pairs)
        where = f"all {len(pairs)} GPUs" if len(pairs) > 1 else "the GPU"
        return value, f"Power draw is {watts} of a {pairs[0][1]:.0f} W limit ({top:.0%} at most) on {where}"
