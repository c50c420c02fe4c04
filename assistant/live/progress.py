"""Is the job making progress? Judged like an expert, from several angles at once.

A stack that moves is not progress by itself: a thread spinning in one loop changes its line
number between two samples and gets nowhere. The judgement combines:
- how each rank's main thread moved: frozen, looping (the same chain of functions, only the line
  changing), or moving (the chain itself changed);
- the log's own rhythm: new lines in the window, and how long it has been silent against its
  usual step interval (silent for many times its step interval is stuck, even within one window);
- I/O: a process that writes a lot is doing something;
- the other ranks: frozen in a collective for the whole window while one rank computes means the
  job is stuck on that rank;
- long phases: a validation pass seen on the stack explains a silent log.

Three states: `hung`, `slow` (progressing far below its own rhythm, with why: garbage collection,
CPU oversubscription, one slow rank...) and `progressing`; `None` when too little was seen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from debug_stuck.core.logstacks import REPEATED_LINE
from debug_stuck.live.collect import Snapshot
from debug_stuck.live.gcframes import frames_in_gc
from debug_stuck.live.loops import own_loop
from debug_stuck.live.wakes import polls, wait_returned, waits_for_input, works_between_sleeps
from debug_stuck.probes.collectors.sockets import RECEIVE_GAP, RECEIVING_MS
from debug_stuck.probes.collectors.stacks import main_thread

# Written in the window by one process: data (a checkpoint upload at 0.65 MB/s, a conversion), not
# the lines a stuck process logs
IO_PROGRESS_BYTES = 256 << 10
# A connection the process waits to read that received data within RECEIVING_MS (the kernel's
# tcp_info, `ss -ti` lastrcv) and kept receiving between two readings (bytes_received grew): a
# transfer under way (a slow download), not a peer that stopped. /proc/PID/io cannot tell: its
# rchar counts read(2), not the recv(2) family that sockets are read with.
# In RECEIVE_GAP: 1 KB/s and more. A keep-alive is far less: an HTTP/2 PING frame is 17 bytes (RFC 9113
# 6.7), a WebSocket ping at most 131 (RFC 6455 5.5), a TCP keep-alive probe carries none; a download
# trickled 1 KB at a time to several connections at once is a transfer (the sixteenth hunt's h03).
RECEIVE_MIN_BYTES = 512
STUCK_MULTIPLE = 20.0  # silent for this many step intervals: stuck
SLOW_MULTIPLE = 10.0  # steps this many times slower than the job's own rhythm: slow
STALE_FLOOR = 60.0  # ... and at least this long, in seconds
GC_MOSTLY = 0.5  # in the garbage collector in at least this share of the samples: slowed by it
BUSY_CPU = 50.0  # percent of a CPU: the process computes
RUN_QUEUE_OVERSUBSCRIBED = 2.0  # CPU wanted vs CPU got: waiting for a CPU most of the time
STOPPED_STATES = ("T", "t")  # stopped by a signal, or by a debugger
# A GPU of the job that computes: busy in every sample and drawing a good share of its power limit.
# A kernel that spins or sleeps keeps utilization at 100% at a low draw (a hung NCCL all_reduce at
# 0.18 of a V100's limit; torch.cuda._sleep at 0.11-0.18 of an H100's and H200's), a GPU doing math
# more (0.6-0.7 on busy A100s; an H100 training: 0.34-0.37 in its first steps, 0.93 after):
# tests/fixtures/gpu and gpu/h100/summary.json.
GPU_COMPUTING_UTIL = 90.0
GPU_COMPUTING_POWER = 0.3
# A GPU of the job fed with kernels as they come: NVML's utilization is the share of its sample
# period in which a kernel ran (nvmlDeviceGetUtilizationRates, nvml.h): below 100 in every reading,
# kernels started and ended in each. A kernel that never ends holds it at 100; a host that stopped
# launching leaves it near 0: H100/H200 recordings (tests/fixtures/gpu, gpu/h200 summaries) read 100
# behind stuck kernels, 0-5 beside stalled DataLoader workers and a stopped rank, 23-28 beside a
# loop of tiny kernels on one line. GPU_FED_MIN_UTIL keeps a margin above that idle floor.
GPU_FED_READINGS = 2
GPU_FED_MIN_UTIL = 10.0


@dataclass
class Progress:
    hung: Optional[bool]
    reasons: List[str] = field(default_factory=list)
    state: Optional[str] = None  # hung | slow | progressing | None
    slow_because: Optional[str] = None
    stuck_on: List[int] = field(default_factory=list)  # pids the job is stuck on (a looping rank)
    undecided_computing: bool = False  # undecided: it, or every helper it waits for, computes: nobody to blame yet

    def __post_init__(self) -> None:
        if self.state is None and self.hung is not None:
            self.state = "hung" if self.hung else "progressing"


def thread_motion(series, tid: int) -> Optional[str]:
    """frozen | looping | moving | None (fewer than two samples)."""
    stacks = []
    for dump in series.dumps if series is not None else []:
        thread = next((t for t in dump.threads if t.tid == tid), None)
        if thread is not None:
            stacks.append(thread)
    if len(stacks) < 2:
        return None
    with_lines = {t.signature(lines=True) for t in stacks}
    if len(with_lines) == 1:
        return "frozen"
    if len({t.signature(lines=False) for t in stacks}) == 1:
        return "looping"
    return "moving"


def computing_gpus(snap: Snapshot) -> list:
    """The job's GPUs that compute through the window (GPU_COMPUTING_*). Only devices that the
    driver's process table links to the job's PIDs count: another job's busy GPU on the same node
    says nothing about this one."""
    if snap.gpus is None:
        return []
    used = snap.job_gpu_indices()
    out = []
    for device in snap.gpus.devices:
        util = device.util_min if device.util_min is not None else device.util
        power = device.power_ratio()
        if device.index in used and util is not None and power is not None:
            if util >= GPU_COMPUTING_UTIL and power >= GPU_COMPUTING_POWER:
                out.append(device)
    return out


def fed_gpus(snap: Snapshot) -> list:
    """The job's GPUs whose kernels keep starting and ending through the window (GPU_FED_*): busy part
    of the time in every reading, on a GPU whose compute processes are all the job's."""
    if snap.gpus is None:
        return []
    job = {p.pid for p in snap.processes}
    shared = {gp.gpu_index for gp in snap.gpus.processes if gp.pid not in job}
    used = snap.job_gpu_indices() - shared
    return [
        device
        for device in snap.gpus.devices
        if device.index in used
        and device.util_samples >= GPU_FED_READINGS
        and device.util_min is not None
        and device.util_min >= GPU_FED_MIN_UTIL
        and device.util_max < 100
    ]


def _size(count: int) -> str:
    return f"{count >> 20} MiB" if count >= 1 << 20 else f"{count >> 10} KiB"


def _busy(device) -> str:
    return f"{device.util_min or device.util:.0f}% busy at {device.power_w:.0f} W of {device.power_limit_w:.0f} W"


def gpu_of_computing(snap: Snapshot) -> dict:
    """{pid: the computing GPU it uses} for the job's processes that the driver's table lists on a GPU
    computing through the window: a loop that launches that GPU's work and waits for it is the work."""
    if snap.gpus is None:
        return {}
    devices = {device.index: device for device in fed_gpus(snap) + computing_gpus(snap)}
    return {gp.pid: devices[gp.gpu_index] for gp in snap.gpus.processes if gp.gpu_index in devices}


def _device_work_on_the_cpu(snap: Snapshot, ranks, device_waits) -> list:
    """Ranks whose main thread sleeps waiting for device computations while the process computes,
    on a machine with no GPU: the device is the CPU backend's threads (JAX or XLA on CPU). With a
    GPU the GPU's own reading tells instead: a hung NCCL keeps its proxy thread busy on the CPU."""
    if device_waits is None or snap.gpus is None or snap.gpus.available or snap.gpus.vendor is not None:
        return []
    return [p for p in ranks if p.state == "S" and (p.cpu_percent or 0.0) >= BUSY_CPU and device_waits(p.pid)]


def receiving(info) -> Optional[dict]:
    """The connection a thread of this process waits to read while data arrives on it, or None: the
    socket of its read, or one its poll or event loop's epoll watches."""
    for wait in (info.waits or {}).values():
        watched = [w.get("object") or {} for w in wait.get("watched") or []]
        for conn in [wait.get("object") or {}] + watched:
            if conn.get("kind") == "socket" and arriving(conn):
                return conn
    return None


def departing(conn: dict) -> bool:
    """Data left this connection between two readings of its tcp_info (bytes_sent grew): a thread
    blocked sending on it feeds a slow reader (an upload to a throttled store), not a peer that stopped
    reading."""
    return conn.get("sent_bytes", 0) >= RECEIVE_MIN_BYTES


def sending(info) -> Optional[dict]:
    """The connection a thread of this process is blocked sending on while data leaves it, or None."""
    for wait in (info.waits or {}).values():
        conn = wait.get("object") or {}
        if wait.get("op") in ("send", "write") and conn.get("kind") == "socket" and departing(conn):
            return conn
    return None


def unmeasured(conn: dict) -> bool:
    """No reading of the connection's tcp_info was taken (`ss` missing, slow or refused): nothing is
    known of whether its peer still sends."""
    return "last_received_ms" not in conn and "received_bytes" not in conn


def arriving(conn: dict) -> bool:
    """Data reached this connection within the last RECEIVING_MS (the kernel's tcp_info): its peer
    has not stopped sending."""
    received = conn.get("received_bytes", 0)
    recent = conn.get("last_received_ms", RECEIVING_MS) < RECEIVING_MS
    # a transfer, not a polling client: some data, and far less sent than received (a client that
    # asks a queue or a status endpoint over and over sends as much as it gets back)
    return recent and received >= RECEIVE_MIN_BYTES and conn.get("sent_bytes", 0) * 8 <= received


def cpu_used(info) -> float:
    """The CPU a process used or wanted over the window, in percent of one CPU (0 when unread)."""
    return info.cpu_wanted() or 0.0


def running(info) -> bool:
    """On a CPU, or wanting one, most of the window: computing, even if every sample shows one line."""
    return info.state == "R" or cpu_used(info) >= BUSY_CPU


def past_its_script(series, pid: int) -> bool:
    """In every sample the main thread holds the GIL with no Python frame: the script (or `-m`
    module) has returned and CPython's Py_FinalizeEx does the work (Python/pylifecycle.c: module
    teardown, a final collection): the process is exiting. A join of non-daemon threads at exit is a
    Python frame (threading._shutdown), and a main thread that waits for the GIL another thread
    keeps is not doing the teardown: neither is this."""
    dumps = series.dumps if series is not None else []
    if not dumps:
        return False
    for dump in dumps:
        thread = main_thread(dump, pid)
        if thread is None or not thread.holds_gil or any(not frame.native for frame in thread.frames):
            return False
    return True


def _in_gc(series) -> bool:
    dumps = series.dumps if series is not None else []
    return any(frames_in_gc(thread.frames) for dump in dumps for thread in dump.threads)


def gc_share(series) -> float:
    """The fraction of the window's samples in which the process was collecting garbage."""
    dumps = series.dumps if series is not None else []
    if not dumps:
        return 0.0
    hits = sum(1 for dump in dumps if any(frames_in_gc(thread.frames) for thread in dump.threads))
    return hits / len(dumps)


@dataclass
class LogRhythm:
    """What a log says about the pace of the job."""

    path: str
    interval: Optional[float]  # its usual seconds per step
    recent: Optional[float]  # over the last few steps
    silent: Optional[float]  # seconds since it last changed
    grew: bool = False

    def stuck(self) -> bool:
        if self.silent is None or self.grew:
            return False
        floor = max(STALE_FLOOR, STUCK_MULTIPLE * (self.interval or 0.0))
        return self.interval is not None and self.silent > floor

    def slow(self) -> Optional[float]:
        """How many times slower than its rhythm the last steps came (None when not slow)."""
        if not self.interval or not self.recent or self.interval <= 0:
            return None
        ratio = self.recent / self.interval
        return ratio if ratio >= SLOW_MULTIPLE else None


def rhythms(snap: Snapshot, tails: Sequence = ()) -> List[LogRhythm]:
    grew = {lg.path for lg in snap.logs if lg.grew and not lg.repeated_error}
    out = []
    now = time.time()
    for tail in tails:
        if getattr(tail, "error", None):
            continue
        prog = tail.progress
        silent = max(0.0, now - tail.mtime) if tail.mtime is not None else None
        out.append(LogRhythm(tail.path, prog.seconds_per_step, prog.recent_seconds_per_step, silent, tail.path in grew))
    return out


def judge_progress(
    snap: Snapshot,
    waiting_pids: Sequence[int] = (),
    tails: Sequence = (),
    phases=None,
    device_waits=None,
    retrying=None,
    helpers=None,
    computes=None,
) -> Progress:
    """`waiting_pids`: ranks found waiting in a collective; `phases(pid) -> phase or None` tells a
    validation or checkpoint pass seen on a main thread; `device_waits(pid) -> bool` whether its main
    thread waits for its device's computations (the frame table's `cuda-sync` waits);
    `retrying(pid) -> bool` whether its main thread stayed inside one call of a wait that retries in
    a loop (a rendezvous, a lock file): its moving frames are that loop, not progress;
    `helpers(pid) -> live.helpers.Helpers or None`: the helpers its main thread waits for (DataLoader
    workers, a pool's workers), when every one of them computes; `computes(pid) -> frame or None`: where
    its main thread computes inside a library, waiting for nothing (live.helpers.computes_in_library)."""
    logs = rhythms(snap, tails)
    # a log that gained only one child traceback after another (workers dying as they start) is no progress
    grew = [lg.path for lg in snap.logs if lg.grew and not lg.repeated_error]
    grown = next((lg for lg in snap.logs if lg.grew and not lg.repeated_error), None)
    ranks = [p for p in snap.processes if p.role == "rank"]
    if not ranks and retrying is not None:
        # no rank started yet: torchrun's agent retrying in the elastic rendezvous is what the job does
        ranks = [p for p in snap.processes if p.role == "launcher" and retrying(p.pid)]
    trainers = ranks + [p for p in snap.processes if p.role == "dataloader-worker"]
    motion = {}
    retried = []  # ranks whose moving frames are a retrying wait's loop
    for info in ranks:
        series = snap.stacks.get(info.pid)
        thread = main_thread(series.latest(), info.pid) if series is not None else None
        motion[info.pid] = thread_motion(series, thread.tid) if thread is not None else None
        if info.state == "T":
            # stopped: a stack reader's ptrace attach wakes it into its stop again (a job-control stop
            # re-raises SIGTTOU), so two samples may differ while it does nothing
            motion[info.pid] = "frozen"
        elif motion[info.pid] in ("moving", "looping") and retrying is not None and retrying(info.pid):
            motion[info.pid] = "frozen"  # waiting, one retry after another
            retried.append(info)
        elif motion[info.pid] == "moving" and _busy_poll(snap, info) is not None:
            motion[info.pid] = "looping"
    moving = [p for p in ranks if motion.get(p.pid) == "moving"]
    looping = [p for p in ranks if motion.get(p.pid) == "looping"]
    frozen = [p for p in ranks if motion.get(p.pid) == "frozen"]
    # any process of the job, a child it waits for too (an extraction, a conversion it runs)
    writers = [p for p in snap.processes if p.io_write_bytes and p.io_write_bytes > IO_PROGRESS_BYTES]
    receivers = [(p, conn) for p in snap.processes for conn in [receiving(p)] if conn is not None]
    senders = [(p, conn) for p in snap.processes for conn in [sending(p)] if conn is not None]
    returned = [(p, text) for p in ranks for text in [wait_returned(p)] if text]  # watched past the window
    waiting = [p for p in ranks if p.pid in set(waiting_pids)]
    stuck_logs = [lg for lg in logs if lg.stuck()]
    computing = moving + looping + [p for p in frozen if running(p)]
    phase = next((phases(p.pid) for p in computing if phases is not None and phases(p.pid)), None)

    # The others wait in a collective for the whole window while some rank does not come: stuck on
    # it when it is stopped or turns in a loop of its own code; a rank that computes is progress
    # (a long pass on one rank) until the log's own rhythm says otherwise.
    stopped = [p for p in ranks if p.state in STOPPED_STATES]
    waiters = [p for p in waiting if p not in stopped]
    if stopped and waiters and all(motion.get(p.pid) == "frozen" for p in waiters) and not grew:
        # a rank frozen by a signal or a debugger, even inside the very collective the others wait in
        who = ", ".join(f"{p.label()} is stopped (state {p.state})" for p in stopped)
        verb = "waits" if len(waiters) == 1 else "wait"
        text = f"{', '.join(p.label() for p in waiters)} {verb} in a collective for the whole window while {who}"
        return Progress(True, [text], stuck_on=[p.pid for p in stopped])
    if waiting and all(motion.get(p.pid) == "frozen" for p in waiting) and not grew:
        moved = writers + [p for p, _ in receivers + senders] + [p for p, _ in returned]
        verdict = _waited_for(snap, ranks, waiting, motion, moved, stuck_logs, phases)
        if verdict is not None:
            return verdict
    respawned = next((lg for lg in snap.logs if lg.repeated_error), None)
    if respawned is not None and ranks and grown is None and all(motion.get(p.pid) == "frozen" for p in ranks):
        text = (
            f"log {respawned.path} gained nothing during the {snap.window:.0f} s window but one child process "
            f"traceback after another ({respawned.repeated_error}): children die as they start and are started again"
        )
        if respawned.repeated_error.startswith(REPEATED_LINE):
            line = respawned.repeated_error[len(REPEATED_LINE) :]
            text = (
                f"log {respawned.path} gained nothing during the {snap.window:.0f} s window but one failure again "
                f"and again (`{line}`): the job retries a call that keeps failing and does nothing else"
            )
        return Progress(True, [text])
    reasons = []
    if grown is not None:
        if grown.role == "written":
            reasons.append(f"the job wrote to {grown.path} during the {snap.window:.0f} s window")
        else:
            reasons.append(f"log {grown.path} grew during the {snap.window:.0f} s window")
    for info in moving:
        reasons.append(f"{info.label()} main thread moved between samples")
    for info in writers:
        reasons.append(f"{info.label()} wrote {_size(info.io_write_bytes)} during the window")
    for info, conn in receivers:
        reasons.append(
            f"{info.label()} receives data on its connection to {conn.get('remote')}: {conn['received_bytes']} "
            f"bytes in {RECEIVE_GAP} s"
        )
    for info, conn in senders:
        reasons.append(
            f"{info.label()} sends data on its connection to {conn.get('remote')}: {conn['sent_bytes']} bytes "
            f"in {RECEIVE_GAP} s"
        )
    reasons.extend(text for _, text in returned)
    for info in _device_work_on_the_cpu(snap, ranks, device_waits):
        reasons.append(
            f"{info.label()} waits for its device's work, which runs on the CPU in its other threads "
            f"({info.cpu_percent:.0f}% CPU)"
        )
    gpus_computing = computing_gpus(snap)
    for device in gpus_computing:
        reasons.append(f"GPU {device.index} computes for the job: {_busy(device)}")
    for device in fed_gpus(snap):
        if device not in gpus_computing:
            reasons.append(
                f"GPU {device.index} runs the job's kernels as they come: {device.util_min:.0f}-{device.util_max:.0f}% "
                f"busy in each of {device.util_samples} readings (kernels start and end), at {device.power_w:.0f} W"
            )
    if reasons and stuck_logs and not grew and not phase:
        lg = stuck_logs[0]
        reasons = []  # the stack moves, but the job's own log has been silent far beyond its rhythm
        return Progress(
            True,
            [f"{lg.path} has been silent for {lg.silent:.0f} s, {lg.silent / lg.interval:.0f} times its step "
             f"interval of {lg.interval:.2g} s, while the stacks only turn in place"],
        )  # fmt: skip
    if reasons:
        return _progressing(snap, logs, reasons, phase, moving + looping)
    if phase:
        # A long evaluation (or save) pass computes with the log silent: that is its nature.
        where = ", ".join(p.label() for p in computing)
        silent = f"; the log has been silent for {stuck_logs[0].silent:.0f} s" if stuck_logs else ""
        return Progress(False, [f"{where} computes in a {phase} pass{silent}"], state="progressing")
    if looping and not frozen:
        where = ", ".join(p.label() for p in looping)
        polling = {p.pid: _busy_poll(snap, p) for p in looping}
        if all(polling.values()):
            who = ", ".join(f"{p.label()} polls in a loop of its own code at {polling[p.pid].text()}" for p in looping)
            return Progress(True, [f"{who}, flat out: a share of its CPU in system calls, not a byte read or "
                                   "written, for the whole window"], stuck_on=[p.pid for p in looping])  # fmt: skip
        if stuck_logs:
            lg = stuck_logs[0]
            return Progress(
                True, [f"{where} loops in place and {lg.path} has been silent for {lg.silent:.0f} s"], stuck_on=[]
            )
        return Progress(None, [f"{where} loops in one place: not progress by itself; no log tells its rhythm"])
    fed = fed_by_busy_helpers(ranks, frozen, waiting, helpers)
    if fed:
        text = "; ".join(f"{rank.label()} {found.said()}" for rank, found in fed)
        if stuck_logs:
            lg = stuck_logs[0]
            return Progress(True, [f"{text}, and {lg.path} has been silent for {lg.silent:.0f} s, "
                                   f"{lg.silent / lg.interval:.0f} times its step interval"])  # fmt: skip
        return Progress(None, [f"{text}: slow work and a task that never ends look alike in one window; "
                               f"{fed[0][1].tells()}"], undecided_computing=True)  # fmt: skip
    inside = [(p, computes(p.pid)) for p in ranks] if computes is not None and frozen == ranks and ranks else []
    if inside and all(where for _, where in inside) and not stuck_logs:
        text = "; ".join(f"{p.label()} computes inside {where} for the whole window ({p.cpu_percent or 0:.0f}% CPU)"
                         for p, where in inside)  # fmt: skip
        first = inside[0][0].pid
        return Progress(None, [f"{text}: a long computation and one that never ends look alike in one window; its "
                               f"arguments in `py-spy dump --locals --pid {first}` (the size of what it works on), and "
                               f"its CPU time in `ps -o etime,time -p {first}` a minute apart, tell them apart"],
                        undecided_computing=True)  # fmt: skip
    # a library's own retry loop (a rendezvous, a lock file) works between its sleeps at waiting
    paced = [text for p in ranks if not (retrying and retrying(p.pid)) for text in [works_between_sleeps(p)] if text]
    if paced and not stuck_logs:
        return Progress(None, [f"{'; '.join(paced)}: a throttled step and a heavy poll look alike from outside; "
                               "its loop counter in `py-spy dump --locals` taken twice a minute apart tells them "
                               "apart"], undecided_computing=True)  # fmt: skip
    finishing = [p for p in frozen if running(p) and past_its_script(snap.stacks.get(p.pid), p.pid)]
    if finishing and len(finishing) == len(frozen):
        who = finishing[0]
        text = "; ".join(f"{p.label()} has no Python frame left at {p.cpu_percent or 0:.0f}% CPU" for p in finishing)
        return Progress(None, [f"{text}: its script has returned and the interpreter tears down (its modules, "
                               "a last garbage collection over everything still alive); a teardown that never ends "
                               f"looks the same in one window: `ps -o etime,time -p {who.pid}` a minute apart, and "
                               f"`py-spy dump --native --pid {who.pid}`, tell them apart"],
                        undecided_computing=True)  # fmt: skip
    sampled = [snap.stacks.get(p.pid) for p in trainers]
    # a retry loop uses little CPU; the state it was read in (R between two sleeps) says nothing
    retry_waits = any(cpu_used(p) < BUSY_CPU for p in retried)
    if any(s is not None and s.frozen() for s in sampled) or retry_waits or any(p.state in "DZT" for p in trainers):
        silent = min((lg.silent for lg in logs if lg.silent is not None), default=None)
        awaiting = [text for p in ranks for text in [waits_for_input(p, silent)] if text]
        if awaiting and len(awaiting) == len(ranks) and not stuck_logs:
            return Progress(None, awaiting)
        seen = [text for p in ranks for text in [polls(p)] if text]
        return Progress(True, ["no stack moved, no log grew, nothing was written during the window"] + seen)
    return Progress(None, ["too little was sampled to tell"])


def fed_by_busy_helpers(ranks, frozen, waiting, helpers) -> list:
    """[(rank, its live.helpers.Helpers)] when every rank either waits in a collective or, its main
    thread frozen, waits for helpers that all compute (live.helpers says why that is no hang yet)."""
    if helpers is None:
        return []
    fed = []
    for rank in ranks:
        if rank in waiting:
            continue
        found = helpers(rank.pid) if rank in frozen else None
        if found is None:
            return []
        fed.append((rank, found))
    return fed


def _waited_for(snap: Snapshot, ranks, waiting, motion, writers, stuck_logs, phases) -> Optional[Progress]:
    """The ranks in `waiting` wait in a collective for the whole window: judge the ranks they wait for."""
    others = [p for p in ranks if p not in waiting]
    waiters = ", ".join(p.label() for p in waiting)
    verb = "waits" if len(waiting) == 1 else "wait"
    busy = [p for p in others if motion.get(p.pid) in ("moving", "looping") or running(p)]
    if not busy or writers:
        return None
    phase = next((phases(p.pid) for p in busy if phases is not None and phases(p.pid)), None)
    loops = {p.pid: own_loop(snap.stacks.get(p.pid), _main_tid(snap, p.pid)) for p in busy}
    on_gpu = gpu_of_computing(snap)
    spinning = [p for p in busy if loops[p.pid] is not None and p.pid not in on_gpu]
    computing = [p for p in spinning if not makes_system_calls(p)]
    if computing and len(computing) == len(spinning) and not phase and not stuck_logs:
        who = ", ".join(f"{p.label()} turns in its own code at {loops[p.pid].text()}" for p in computing)
        first = computing[0].pid
        return Progress(None, [f"{waiters} {verb} in a collective while {who}, making no system call: a long "
                               "pure-Python pass and a loop that never ends look alike in one window; its locals in "
                               f"`py-spy dump --locals --pid {first}` taken twice a minute apart (a loop counter, an "
                               "index) tell them apart"], undecided_computing=True)  # fmt: skip
    if spinning and not phase:
        who = ", ".join(f"{p.label()} turns in one loop of its own code at {loops[p.pid].text()}" for p in spinning)
        return Progress(True, [f"{waiters} {verb} in a collective for the whole window while {who}"],
                        stuck_on=[p.pid for p in spinning])  # fmt: skip
    who = ", ".join(p.label() for p in busy)
    if stuck_logs and not phase:
        lg = stuck_logs[0]
        return Progress(True, [f"{waiters} {verb} in a collective while {who} computes, and {lg.path} has been "
                               f"silent for {lg.silent:.0f} s, {lg.silent / lg.interval:.0f} times its step interval"],
                        stuck_on=[p.pid for p in busy])  # fmt: skip
    gpus = sorted({on_gpu[p.pid].index: on_gpu[p.pid] for p in busy if p.pid in on_gpu}.items())
    if phase:
        doing = f"computes in a {phase} pass"
    elif gpus:
        doing = "computes on " + ", ".join(f"GPU {index} ({_busy(device)})" for index, device in gpus)
    else:
        doing = "keeps computing, not in a loop of its own code,"
    return Progress(False, [f"{who} {doing} while {waiters} {verb} for it in a collective: one rank's long pass, "
                            "not a hang so far"], state="progressing")  # fmt: skip


# A loop that polls something (a flag file's stat, a socket, a clock read through a system call) spends a
# share of its CPU in the kernel: `while not os.path.exists(flag): pass` 19% on this machine; a loop that
# computes in Python (hashing, parsing, deduplicating) or one that spins on a variable, 0%.
POLL_SYSTEM_SHARE = 0.05
POLL_FAULTS_PER_S = 200  # measured: a `while not os.path.exists(f)` poll 0 a second, a dict-filling loop 40,000


def _busy_poll(snap: Snapshot, info):
    """The frame of the job's own code in which pid's main thread busy-polls, or None. It does when it
    moved only within one function of the job's own code, with nothing but the standard library under
    it (live.loops.own_loop), running flat out, a share of its CPU in system calls, and not a byte read
    or written: a busy poll (`while not os.path.exists(flag): n += 1`),
    whose samples differ only by where in the poll they fell (the `while` line, `n += 1`, inside
    genericpath.exists). Not progress: a loop that reads its data moves bytes; one that computes
    makes no system calls; one that builds up data faults pages in, kernel time that is memory's
    (POLL_FAULTS_PER_S: a stat poll makes none, a loop filling dicts tens of thousands a second)."""
    if not running(info) or info.cpu_system_percent is None or not makes_system_calls(info):
        return None
    if info.io_read_bytes is None or info.io_read_bytes or info.io_write_bytes:
        return None
    if info.minor_faults is None or info.minor_faults > POLL_FAULTS_PER_S * max(1.0, snap.window):
        return None
    return own_loop(snap.stacks.get(info.pid), _main_tid(snap, info.pid))


def makes_system_calls(info) -> bool:
    """The process spends a share of its CPU in system calls (unknown: assumed so, the old reading)."""
    if info.cpu_system_percent is None or not info.cpu_percent:
        return True
    return info.cpu_system_percent >= POLL_SYSTEM_SHARE * info.cpu_percent


def _main_tid(snap: Snapshot, pid: int) -> Optional[int]:
    thread = snap.latest_main_thread(pid)
    return thread.tid if thread is not None else None


def _progressing(snap: Snapshot, logs: List[LogRhythm], reasons: List[str], phase, busy) -> Progress:
    """Progressing, or slow: far below the log's own rhythm, with why."""
    if phase:
        return Progress(False, reasons + [f"in a {phase} pass"], state="progressing")
    slow = [(lg, lg.slow()) for lg in logs if lg.slow()]
    if not slow:
        ranks = [p for p in snap.processes if p.role == "rank"]
        shares = [(gc_share(snap.stacks.get(p.pid)), p) for p in ranks]
        share, who = max(shares, key=lambda item: item[0], default=(0.0, None))
        if who is not None and share >= GC_MOSTLY:
            text = f"{who.label()} was collecting garbage in {share:.0%} of the samples"
            return Progress(False, reasons + [text], state="slow", slow_because="garbage collection")
        return Progress(False, reasons, state="progressing")
    lg, ratio = slow[0]
    why = None
    if any(_in_gc(snap.stacks.get(p.pid)) for p in busy) or any(
        _in_gc(snap.stacks.get(p.pid)) for p in snap.processes if p.role == "rank"
    ):
        why = "garbage collection (the stacks are in gc.collect)"
    else:
        starved = [
            p for p in snap.processes
            if p.cpu_percent and p.cpu_demand and p.cpu_demand >= RUN_QUEUE_OVERSUBSCRIBED * p.cpu_percent
        ]  # fmt: skip
        if starved:
            why = f"CPU oversubscription ({starved[0].label()} waits for a CPU more than it runs)"
    text = (
        f"steps come every {lg.recent:.2g} s, {ratio:.0f} times slower than the job's own rhythm of "
        f"{lg.interval:.2g} s ({lg.path})"
    )
    return Progress(False, reasons + [text], state="slow", slow_because=why or "unknown: see the stacks")
