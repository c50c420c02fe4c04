"""The watcher's eyes: the logs followed line by line (the step counter), the process tree's CPU and
I/O, the GPUs, the hook's heartbeats and, when nothing else moved for a while, the stacks. A mixin
of Watcher: what it sees goes to the stall clock as progress or activity."""

from __future__ import annotations

import time
from typing import List, Optional

from debug_stuck.actions.watch.attach_history import AttachHistory
from debug_stuck.actions.watch.follow import unique_logs
from debug_stuck.actions.watch.settings import (
    CPU_ACTIVE_PERCENT,
    GPU_ACTIVE_UTIL,
    GPU_EVERY_SECONDS,
    HOOK_LOOK_EVERY,
    IO_ACTIVE_BYTES_PER_SECOND,
    STACK_TIMEOUT,
)
from debug_stuck.actions.watch.tree import TreeSample
from debug_stuck.core.phases import phase_of
from debug_stuck.probes.collectors.stacks import main_thread


class Sampler(AttachHistory):
    def _logs(self) -> List[str]:
        """The job's logs and the --log ones, each once, by real path (and inode)."""
        opened = self.job.read_paths if self.job else {}
        return unique_logs(list(self.job.logs if self.job else []) + list(self.settings.logs), opened)

    def _follow_logs(self, now: float, final: bool = False) -> bool:
        stepped = False
        for follower in self.followers:
            lines, grew = follower.read(final=final)
            if grew:
                self.clock.activity(now)
            if lines:
                from debug_stuck.core.logtext import parse_progress

                progress = parse_progress(lines)
                first = self.clock.step_changes == 0
                if progress.last_step is not None and self.clock.step(progress.last_step, now):
                    stepped = self.steps_from_log = True
                    if first:
                        self._check_resumed(lines)
        return stepped

    def _check_resumed(self, lines: List[str]) -> None:
        """A restart meant to resume after checkpoint step S: the new run's first step says whether it did."""
        expected, self.expect_resume_after = self.expect_resume_after, None
        if expected is None:
            return
        from debug_stuck.core.logtext import parse_progress

        first = next(
            (p.last_step for p in map(parse_progress, ([line] for line in lines)) if p.last_step is not None), None
        )
        if first is not None and first < expected:
            self.emit(
                "warning",
                message=f"the restarted run (pid {self.job.pid}) began at step {first}, not after the checkpoint's "
                f"step {expected}: it did not resume from the checkpoint, so everything before is being redone",
            )

    def _sample_tree(self, now: float) -> Optional[TreeSample]:
        sample = self.tree.sample(now) if self.tree is not None else None
        if sample is None or not sample.alive:
            return sample
        self.last_sample = sample
        if sample.cpu_percent is not None and sample.cpu_percent >= CPU_ACTIVE_PERCENT:
            self.clock.activity(now)
        if sample.io_bytes_per_second is not None and sample.io_bytes_per_second >= IO_ACTIVE_BYTES_PER_SECOND:
            self.clock.activity(now)
        return sample

    def _sample_gpu(self, now: float) -> None:
        if self.gpu_available is False:
            return
        if self.gpu_checked_at is not None and now - self.gpu_checked_at < GPU_EVERY_SECONDS:
            return
        self.gpu_checked_at = now
        from debug_stuck.probes.collectors.gpu.collect import collect_gpus

        snap = collect_gpus(timeout=3.0, samples=1)
        if not snap.available or not snap.devices:
            self.gpu_available = False
            return
        self.gpu_available = True
        pids = set(self.tree.remembered()) if self.tree is not None else set()
        used = {p.gpu_index for p in snap.processes if p.pid in pids}
        devices = [d for d in snap.devices if not used or d.index in used]
        utils = [d.util for d in devices if d.util is not None]
        power = [d.power_ratio() for d in devices if d.power_ratio() is not None]
        self.last_gpu = {
            "util": max(utils) if utils else None,
            "power_ratio": round(max(power), 3) if power else None,
            "devices": [d.index for d in devices],
        }
        if utils and max(utils) >= GPU_ACTIVE_UTIL:
            self.clock.activity(now)

    def _follow_heartbeats(self, now: float) -> None:
        """A job with debug_stuck.hook reports its step itself: a new step is progress, as a new
        step in the log is (it needs no ptrace and no log). Its counter is used as the step only
        while the log gives none (two counters would look like steps forever); otherwise a beat is
        activity. Markers are looked for every HOOK_LOOK_EVERY seconds per process until found."""
        from debug_stuck.probes.collectors.hook_dump import find_marker, read_heartbeat

        pids = self.tree.python_pids() if self.tree is not None else []
        for pid in pids:
            entry = self.heartbeats.setdefault(pid, [None, None, None])
            marker, looked, last = entry
            if marker is None:
                if looked is not None and now - looked < HOOK_LOOK_EVERY:
                    continue
                entry[0], _ = find_marker(pid)
                entry[1] = now
                marker = entry[0]
                if marker is None:
                    continue
            beat = read_heartbeat(marker)
            if beat is None or beat == last:
                continue
            entry[2] = beat
            at, step = beat
            when = now - max(0.0, time.time() - at)  # the beat's own time, on the monotonic clock
            if step is not None and not self.steps_from_log:
                self.clock.step(step, when)
            elif last is not None:
                self.clock.activity(when)

    def _sample_stacks(self, now: float, final: bool = False) -> None:
        from debug_stuck.probes.collectors.stacks import sample_stacks

        pids = self.tree.python_pids() if self.tree is not None else []
        if not pids:
            self.stack_sampled_at = now
            return
        series = sample_stacks(pids, samples=1, native=False, timeout=STACK_TIMEOUT)
        self.stack_sampled_at = time.monotonic()
        self.motion.begin(self.clock.last_progress)
        moved = False
        fresh = {}
        for pid, entry in series.items():
            dump = entry.latest()
            if dump is None:
                continue
            fresh[pid] = dump
            before = main_thread(self.dumps.get(pid), pid)
            after = main_thread(dump, pid)
            if before is not None and after is not None and before.signature(lines=True) != after.signature(lines=True):
                moved = True
            if after is not None:
                self.motion.add(pid, after, self.stack_sampled_at)
        if moved:
            self.clock.activity(self.stack_sampled_at)
        self.dumps = fresh
        self._judge_motion(pids, final)
        for pid, dump in fresh.items():
            thread = main_thread(dump, pid)
            if thread is None:
                continue
            found = phase_of(thread.frames, self.knowledge)
            if found is not None:
                phase, frame = found
                if self.clock.in_phase(phase, frame):
                    self.emit(
                        "phase",
                        phase=phase,
                        frame=frame,
                        pid=pid,
                        seconds=round(self.clock.since_progress(now), 1),
                        allowance=round(self.clock.phase_allowance(), 1),
                    )
                break

    def _maybe_progress_event(self, now: float) -> None:
        every = self.settings.progress_every
        if not every:
            return
        if self.progress_emitted_at is not None and now - self.progress_emitted_at < every:
            return
        self.progress_emitted_at = now
        interval = self.clock.interval()
        sample = self.last_sample
        self.emit(
            "progress",
            pid=self.job.pid,
            step=self.clock.last_step,
            seconds_since_step=round(self.clock.since_progress(now), 1) if self.clock.last_step is not None else None,
            interval=round(interval, 3) if interval is not None else None,
            threshold=round(self.clock.threshold(), 1),
            stepping=self.clock.stepping,
            cpu_percent=sample.cpu_percent if sample else None,
            processes=sample.processes if sample else None,
        )
