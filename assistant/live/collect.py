"""Collect live evidence about a job: processes, stacks, GPUs, kernel log, log growth.

All collectors run in parallel over one sampling window, each with its own time bound, so the
whole collection costs about one window however many processes the job has.
"""

from __future__ import annotations

import os
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from debug_stuck.errors import NotInspectable
from debug_stuck.probes.collectors.logtail import repeated_error_growth
from debug_stuck.probes.collectors.procs import (
    InspectError,
    ProcInfo,
    describe_job_key,
    find_training_processes,
    group_jobs,
    job_key,
    job_processes,
    nfs_servers,
    program_of,
    read_states,
    sample_window,
    shm_usage,
    split_rendezvous,
)

TRAINING_ROLES = ("launcher", "rank", "dataloader-worker")
DEFAULT_WINDOW = 1.0
DEFAULT_SAMPLES = 2

PTRACE_HINT = (
    "run debug-stuck as root or as the job's user with ptrace allowed: "
    "sudo debug-stuck ..., or give py-spy CAP_SYS_PTRACE (containers: --cap-add SYS_PTRACE)"
)


@dataclass
class LogGrowth:
    path: str  # as the job sees it (or as the user gave it)
    size_before: Optional[int]
    size_after: Optional[int]
    read_path: Optional[str] = None  # /proc/P/fd/N for a file the job holds open: read it there
    role: str = "log"  # stdout | stderr | written | log (given with --log)
    repeated_error: Optional[str] = None  # all it gained is one child traceback, again and again

    @property
    def text_log(self) -> bool:
        """A log whose tail is read as evidence (a written file only when its name says text)."""
        from debug_stuck.probes.collectors.jobfiles import TEXT_LOG

        return self.role != "written" or bool(TEXT_LOG.search(self.path))

    @property
    def grew(self) -> bool:
        return self.size_before is not None and self.size_after is not None and self.size_after > self.size_before


@dataclass
class Snapshot:
    host: str
    taken_at: float
    window: float
    processes: List[ProcInfo]
    stacks: Dict[int, object] = field(default_factory=dict)  # pid -> debug_stuck.probes.collectors.stacks.StackSeries
    gpus: Optional[object] = None  # debug_stuck.probes.collectors.gpu.GpuSnapshot
    kernel: Optional[object] = None  # debug_stuck.probes.collectors.kernel.KernelLog
    shm: Optional[dict] = None
    logs: List[LogGrowth] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)  # things worth telling that are not failures
    # evidence that could not be read, why, and the one command or setting that would get it
    missing: List[dict] = field(default_factory=list)
    heartbeats: Dict[int, dict] = field(default_factory=dict)  # pid -> {"at", "step"} from debug_stuck.hook
    nfs_servers: List[str] = field(default_factory=list)  # NFS servers mounted where the job runs
    fr_dumps: List[str] = field(default_factory=list)  # Flight Recorder dumps the hook wrote on request

    def job_gpu_indices(self) -> set:
        """The GPUs that the driver's process table says the job's processes use (empty when it says
        nothing: no per-process table, as in many containers)."""
        if self.gpus is None:
            return set()
        job = {p.pid for p in self.processes}
        return {gp.gpu_index for gp in self.gpus.processes if gp.pid in job}

    def process(self, pid: int) -> Optional[ProcInfo]:
        return next((p for p in self.processes if p.pid == pid), None)

    def latest_main_thread(self, pid: int):
        """pid's main thread in its latest stack sample, or None when no stack of it was read."""
        from debug_stuck.probes.collectors.stacks import main_thread

        series = self.stacks.get(pid)
        return main_thread(series.latest(), pid) if series is not None else None

    def to_dict(self) -> dict:
        return {
            "host": self.host,
            "taken_at": self.taken_at,
            "window": self.window,
            "processes": [p.to_dict() for p in self.processes],
            "stacks": {
                str(pid): {
                    "dumps": [[t.to_dict() for t in d.threads] for d in series.dumps],
                    "error": series.error,
                    "motion": {str(k): v for k, v in series.thread_motion().items()},
                }
                for pid, series in self.stacks.items()
            },
            "gpus": self.gpus.to_dict() if self.gpus is not None else None,
            "kernel": self.kernel.to_dict() if self.kernel is not None else None,
            "shm": self.shm,
            "logs": [lg.__dict__ for lg in self.logs],
            "errors": self.errors,
            "notes": self.notes,
            "missing": self.missing,
            "heartbeats": {str(pid): beat for pid, beat in self.heartbeats.items()},
            "nfs_servers": self.nfs_servers,
        }


def resolve_targets(pids: List[int], auto: bool) -> Tuple[List[ProcInfo], List[str]]:
    """The job's processes, and notes on how they were chosen. With --auto, the training process
    trees of this machine grouped into jobs (ranks started side by side, by srun or a shell, share
    their Slurm job, torchelastic run or rendezvous address), the oldest job taken; with --pid, the
    job of each PID, its sibling ranks included."""
    notes: List[str] = []
    try:
        if auto and not pids:
            roots = find_training_processes()
            if not roots:
                raise NotInspectable(
                    "no training process found on this machine (Python processes that load libtorch)",
                    "give the job's PIDs with --pid",
                )
            jobs = group_jobs(roots)
            key, pids = jobs[0]
            if len(jobs) > 1:
                others = "; ".join(f"{describe_job_key(k)} (pids {', '.join(map(str, p))})" for k, p in jobs[1:])
                notes.append(
                    f"{len(jobs)} training jobs found on this machine; diagnosed the oldest, {describe_job_key(key)} "
                    f"(pids {', '.join(map(str, pids))}). The others: {others}. Give --pid to choose another."
                )
            elif len(pids) > 1:
                notes.append(f"one job of {len(pids)} process trees started side by side ({describe_job_key(key)})")
        elif pids:
            from debug_stuck.probes.collectors.procs import trainer_of

            climbed = []
            for pid in pids:
                top, note = trainer_of(pid, given=pids)  # a DataLoader worker's PID stands for its whole job
                climbed.append(top)
                if note:
                    notes.append(note)
            pids = _with_siblings(list(dict.fromkeys(climbed)), notes)
            _note_launcher_scripts(pids, notes)
        return job_processes(pids), notes
    except InspectError as exc:
        hint = PTRACE_HINT if exc.kind == "permission" else "check the PID with ps; give a running process"
        raise NotInspectable(exc.message, exc.hint or hint) from None


def _note_launcher_scripts(pids: List[int], notes: List[str]) -> None:
    """A rank started by a launcher script of the job's own: its siblings are not read unless the
    user says they are one job (a sweep starts its independent trials the same way)."""
    from debug_stuck.probes.collectors.procs import launcher_script_of

    for pid in pids:
        found = launcher_script_of(pid)
        if found is None or found[0] in pids:
            continue
        parent, cmdline, copies = found
        notes.append(
            f"pid {pid} is one of {copies} copies of one program that pid {parent} ({cmdline[:120]}) started: "
            f"if they are the ranks of one job, diagnose it whole with --pid {parent}"
        )


def _with_siblings(pids: List[int], notes: List[str]) -> List[int]:
    """The given PIDs, plus the ranks of the same job that no common launcher ties to them."""
    keys = {job_key(pid) for pid in pids}
    keys = {k for k in keys if k[0] != "pid"}
    if not keys:
        return pids
    added, split = [], []
    for key, members in group_jobs(find_training_processes()):
        if key in keys:
            added += [p for p in members if p not in pids]
        elif key[0] == "rendezvous" and split_rendezvous(pids + members):
            split += [p for p in members if p not in pids]  # ranks of this job at another MASTER_PORT
    if added:
        notes.append(
            f"also took pid(s) {', '.join(map(str, added))}: ranks of the same job "
            f"({', '.join(describe_job_key(k) for k in keys)}) started without a common launcher"
        )
    if split:
        notes.append(
            f"also took pid(s) {', '.join(map(str, split))}: run by the same parent with the same command and "
            "WORLD_SIZE and another RANK, but another MASTER_ADDR:MASTER_PORT"
        )
    return list(dict.fromkeys(pids + added + split))


def collect(
    pids: List[int],
    auto: bool = False,
    extra_logs: Optional[List[str]] = None,
    window: float = DEFAULT_WINDOW,
    samples: int = DEFAULT_SAMPLES,
    native: bool = False,
    progress: Optional[Callable[[str], None]] = None,
) -> Snapshot:
    """Gather the evidence for one job on this machine. Raises NotInspectable (exit 3)."""
    say = progress or (lambda msg: None)
    say("finding the job's processes")
    procs, target_notes = resolve_targets(pids, auto)
    if not any(p.python for p in procs):
        first = procs[0]
        raise NotInspectable(
            f"process {first.pid} ({first.name}) is not a Python process",
            "debug-stuck reads Python stacks; give the PID of the Python training process (or its launcher)",
        )
    snap = Snapshot(host=socket.gethostname(), taken_at=time.time(), window=window, processes=procs)
    snap.notes.extend(target_notes)
    from debug_stuck.probes.collectors.jobfiles import job_files, sizes_of

    alive = [p for p in procs if p.state != "Z"]
    files = job_files([p.pid for p in alive], [p.pid for p in alive if p.role in TRAINING_ROLES])
    given = _not_already_read(list(dict.fromkeys(extra_logs or [])), files)
    watched = [jf.read_path for jf in files] + given
    before = sizes_of(watched)
    python_pids = [p.pid for p in procs if p.python and p.state != "Z"]

    from debug_stuck.live.pipeholders import adopt_pipe_holders
    from debug_stuck.probes.collectors.gpu.collect import collect_gpus
    from debug_stuck.probes.collectors.kernel import read_kernel_log
    from debug_stuck.probes.collectors.stacks import sample_stacks

    read_states(procs)
    say(f"sampling {len(procs)} process(es) for {window * max(1, samples - 1):.0f} s")
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="collect") as pool:
        stacks = pool.submit(sample_stacks, python_pids, samples=samples, interval=window, native=native)
        window_job = pool.submit(sample_window, procs, window * max(1, samples - 1))
        gpus = pool.submit(collect_gpus)
        kernel = pool.submit(read_kernel_log)
        snap.stacks = _result(stacks, snap.errors, "stacks", {})
        _stacks_through_hook(snap, samples, window)
        _result(window_job, snap.errors, "process sampling", None)
        snap.gpus = _result(gpus, snap.errors, "GPU state", None)
        snap.kernel = _result(kernel, snap.errors, "kernel log", None)
    snap.shm = shm_usage()
    snap.nfs_servers = nfs_servers(procs[0].pid)
    _refine_roles(snap)
    _resolve_waits(snap)
    snap.notes.extend(adopt_pipe_holders(snap))
    _lock_files(snap)
    _own_loops(snap)
    _stdin_prompts(snap)
    _gc_calls(snap)
    from debug_stuck.live.wakes import watch_sleepers

    watched_error = watch_sleepers(snap, say)  # after the stack samplers: they stop the threads
    if watched_error:
        snap.errors.append(watched_error)
    after = sizes_of(watched)  # after the watch too: a log written between two sleeps counts
    snap.logs = [LogGrowth(jf.path, before[jf.read_path], after[jf.read_path], jf.read_path, jf.role) for jf in files]
    snap.logs += [LogGrowth(path, before[path], after[path]) for path in given]
    for grown in (lg for lg in snap.logs if lg.grew and lg.text_log):
        grown.repeated_error = repeated_error_growth(grown.read_path or grown.path, grown.size_before, grown.size_after)
    for info in procs:
        snap.errors.extend(f"{info.label()}: {e}" for e in info.errors)
    for pid, series in snap.stacks.items():
        info = snap.process(pid)
        label = info.label() if info else str(pid)
        if series.error:
            snap.errors.append(f"{label}: stacks: {series.error}")
        latest = series.latest()
        for note in getattr(latest, "notes", None) or []:
            snap.notes.append(f"{label}: {note}")
    _refuse_when_nothing_readable(snap)
    _say_what_is_missing(snap)
    if snap.gpus is not None:
        snap.errors.extend(snap.gpus.errors)
    if snap.kernel is not None and snap.kernel.error:
        snap.errors.append(snap.kernel.error)
    say("classifying")
    return snap


def _result(future, errors: List[str], what: str, default):
    try:
        return future.result()
    except Exception as exc:  # a collector bug must not cost the whole report
        errors.append(f"could not collect {what}: {type(exc).__name__}: {exc}")
        return default


def _refine_roles(snap: Snapshot) -> None:
    """Stacks settle roles the command line cannot: a forked child running _worker_loop is a worker.
    A child started with a rank of its own in its environment is another rank, not a worker: a
    script launcher (Lightning's, for one) re-runs the same command line with LOCAL_RANK=1..n-1,
    while a worker inherits its trainer's environment, rank and all."""
    workers = set()
    for pid, series in snap.stacks.items():
        info = snap.process(pid)
        dump = series.latest()
        if info is None or dump is None:
            continue
        names = {f.function.rsplit(".", 1)[-1] for t in dump.threads for f in t.frames}
        if "_worker_loop" in names:
            workers.add(pid)
            info.role = "dataloader-worker"
            parent = snap.process(info.ppid)
            if parent is not None:
                info.rank = parent.rank
    for info in snap.processes:
        parent = snap.process(info.ppid)
        if info.role != "dataloader-worker" or info.pid in workers or parent is None or parent.role != "rank":
            continue
        own = (info.rank, info.local_rank)
        if own != (None, None) and own != (parent.rank, parent.local_rank):
            info.role = "rank"
    _ranks_of_a_launcher_script(snap, workers)
    _ranks_of_a_script_relauncher(snap)
    _dead_ranks_of_a_launcher(snap)
    _world_size_at_the_store(snap)


def _ranks_of_a_launcher_script(snap: Snapshot, workers=frozenset()) -> None:
    """A Python child left as "other" whose frames are a distributed library's (frames.yaml `facts:
    [distributed]`: jax.distributed, torch.distributed, Horovod...) is a rank: a job's own launcher
    script starts its ranks with subprocess, under no name that torchrun's or mpirun's would match.
    So is a multiprocessing child taken for a worker by its command line (spawn_main) that is not
    in a DataLoader's worker loop (`workers`): torch.multiprocessing.spawn, DDP's usual way to start
    its ranks, starts them so; children that meet at a plain multiprocessing barrier stay workers.
    Their parent, a Python process with no such frame, is then their launcher, not a rank."""
    from debug_stuck.live.jobfacts import frames_table, in_process_group, table_facts

    table = frames_table()
    if table is None:
        return  # a broken table is reported by the diagnosis itself

    def facts_of(pid: int) -> set:
        # native frames too: a DDP rank waiting in backward shows its collective only there
        # (c10d::Reducer::finalize_backward), its Python frames being autograd's. Every sample of the
        # window: a rank of a healthy job is in its collective only part of the time (a barrier between
        # its own steps), and the latest sample may catch it computing
        return table_facts(_window_frames(snap, pid), table)

    def distributed(pid: int) -> bool:
        info = snap.process(pid)
        return (info is not None and in_process_group(info)) or "distributed" in facts_of(pid)

    def takes_no_part(pid: int) -> bool:
        # no distributed library's frame; or torch elastic's agent run in-process (elastic_launch,
        # accelerate's notebook_launcher), distributed by its frames yet the ranks' launcher, as
        # torchrun's agent is
        facts = facts_of(pid)
        return "launcher" in facts or not distributed(pid)

    def unsettled(info) -> bool:
        return info.role == "other" or (info.role == "dataloader-worker" and info.pid not in workers)

    promoted = [info for info in snap.processes if unsettled(info) and info.python and distributed(info.pid)]
    # ... and so is a sibling that runs the same program, caught outside the library (the rank the
    # others wait for is often the one that never reached the collective)
    programs = {(info.ppid, program_of(info.cmdline)) for info in promoted}
    promoted += [
        info
        for info in snap.processes
        if unsettled(info) and info not in promoted and (info.ppid, program_of(info.cmdline)) in programs
    ]
    for info in promoted:
        if info.role == "dataloader-worker":
            info.rank = None  # the parent's rank, given to it as a worker: a spawned rank has its own
        info.role = "rank"
    _ranks_of_spawned_children(snap, promoted)
    for info in promoted:
        parent = snap.process(info.ppid)
        if parent is None or parent.role != "rank" or parent in promoted:
            continue
        if takes_no_part(parent.pid):
            parent.role = "launcher"
    # torchrun's agent before it starts any worker (its node waits in the elastic rendezvous): its own
    # frames say launcher, and it has no rank of its own
    for info in snap.processes:
        if info.role == "rank" and (info.rank, info.local_rank) == (None, None) and "launcher" in facts_of(info.pid):
            info.role = "launcher"
    # a script that starts its ranks with RANK in their environment (subprocess, as launch scripts
    # do) and takes no part itself: no rank of its own, no distributed library's frame
    for info in [p for p in snap.processes if p.role == "rank" and p.rank is not None]:
        parent = snap.process(info.ppid)
        if (
            parent is not None
            and parent.role == "rank"
            and (parent.rank, parent.local_rank) == (None, None)
            and takes_no_part(parent.pid)
        ):
            parent.role = "launcher"


def _dead_ranks_of_a_launcher(snap: Snapshot) -> None:
    """A dead child (a zombie: no command line or environment left to read) of a process that launches
    ranks is one of its ranks, not a DataLoader worker: a launcher (torchrun's agent, a job's own
    launcher script) starts ranks, and a rank that crashed before its peers met stays a zombie until
    the launcher waits for it."""
    launchers = {p.pid for p in snap.processes if p.role == "launcher"}
    for info in snap.processes:
        if info.state == "Z" and info.role == "dataloader-worker" and info.ppid in launchers:
            info.role, info.rank = "rank", None


def _ranks_of_a_script_relauncher(snap: Snapshot) -> None:
    """Lightning's script launcher runs the job's own command again for local ranks 1..n-1, with
    LOCAL_RANK, NODE_RANK and WORLD_SIZE in their environment and no RANK; "the main process which
    launched the others has LOCAL_RANK=0", set in its own os.environ only (lightning 2.6
    fabric/strategies/launchers/subprocess_script.py). Each global rank is NODE_RANK * n + LOCAL_RANK
    (pytorch/strategies/ddp.py set_world_ranks), n the processes per node."""
    for parent in snap.processes:
        if parent.role != "rank" or (parent.rank, parent.local_rank) != (None, None):
            continue
        children = [p for p in snap.processes if p.ppid == parent.pid and p.role == "rank" and p.rank is None]
        local = sorted(p.local_rank for p in children if p.local_rank is not None)
        if not local or local != list(range(1, len(local) + 1)):
            continue
        parent.local_rank = 0
        nodes = {str(p.env.get("NODE_RANK", p.env.get("GROUP_RANK", ""))).strip() for p in children}
        if len(nodes) != 1 or not next(iter(nodes)).isdigit():
            continue  # no node index: local ranks only
        base = int(next(iter(nodes))) * (len(local) + 1)
        parent.rank = base
        for child in children:
            child.rank = base + child.local_rank
        snap.notes.append(
            f"ranks of pid {parent.pid} and its {len(children)} re-run(s) of the job's command (Lightning's "
            "script launcher: LOCAL_RANK 1..n-1 in their environment, the process that started them local rank 0)"
        )


def _latest_frames(snap: Snapshot, pid: int) -> list:
    """Every frame, native ones too, of every thread of pid's latest stack dump."""
    series = snap.stacks.get(pid)
    dump = series.latest() if series is not None else None
    return [f for t in (dump.threads if dump is not None else []) for f in t.frames]


def _window_frames(snap: Snapshot, pid: int) -> list:
    """Every frame of every thread of every stack sample of pid over the window."""
    series = snap.stacks.get(pid)
    dumps = series.dumps if series is not None else []
    return [f for dump in dumps if dump is not None for t in dump.threads for f in t.frames]


def _has_frame(snap: Snapshot, pid: int, function: str, file_end: str) -> bool:
    """A thread of pid's latest stack dump has a frame of `function` in a file ending with `file_end`."""
    frames = _latest_frames(snap, pid)
    return any(f.function == function and (f.path or f.file or "").endswith(file_end) for f in frames)


def _for_each(items: list, read: Callable) -> list:
    """read(item) for each item, side by side (each a bounded py-spy call of its own)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        return list(pool.map(read, items))


SPAWN_WRAP = ("_wrap", "torch/multiprocessing/spawn.py")
OTHER_NODE_ENV = ("NODE_RANK", "GROUP_RANK", "SLURM_NODEID")


def _ranks_of_spawned_children(snap: Snapshot, promoted) -> None:
    """torch.multiprocessing.spawn (and start_processes under Lightning's ddp_spawn, accelerate's
    notebook_launcher) calls each child's function as `fn(i, *args)` from `_wrap(fn, i, args,
    error_file)` (torch/multiprocessing/spawn.py): `i` is its process index on the node, the rank
    the job's code is given, with no RANK in its environment. It is read with py-spy --locals, that
    one argument kept. It is the global rank on the first node; a job that says it runs on another
    node (NODE_RANK, GROUP_RANK, SLURM_NODEID above 0) gets it as its local rank only."""
    function, file_end = SPAWN_WRAP
    todo = [
        info
        for info in promoted
        if info.rank is None and info.local_rank is None and _has_frame(snap, info.pid, function, file_end)
    ]
    if not todo:
        return
    from debug_stuck.probes.collectors.stacks import frame_arguments

    indices = _for_each(todo, lambda info: frame_arguments(info.pid, function, file_end).get("i"))
    read = 0
    for info, index in zip(todo, indices):
        if index is None or not index.isdigit():
            continue
        read += 1
        info.local_rank = int(index)
        if all(str(info.env.get(name, "0")).strip() in ("", "0") for name in OTHER_NODE_ENV):
            info.rank = info.local_rank
    if read:
        snap.notes.append(
            f"ranks of {read} torch.multiprocessing.spawn children: the index torch passes to each as _wrap's "
            "argument i, read with py-spy --locals (only that argument kept)"
        )
    if read < len(todo):
        snap.notes.append(f"{len(todo) - read} spawned ranks' index could not be read (py-spy --locals)")


# torch 2.13.0 torch/distributed/distributed_c10d.py: init_process_group(backend, init_method, timeout, world_size=-1,
# rank=-1, ...); torch/distributed/rendezvous.py: _create_c10d_store(hostname, port, rank, world_size, ...) builds
# the TCPStore that rank 0 hosts and waits on for world_size clients
WORLD_SIZE_ARGS = (
    ("init_process_group", "torch/distributed/distributed_c10d.py"),
    ("_create_c10d_store", "torch/distributed/rendezvous.py"),
)


def _world_size_at_the_store(snap: Snapshot) -> None:
    """The world size a rank waits for in process-group setup, when its environment does not say it
    (a tcp:// init_method, mp.spawn passing world_size as an argument): the `world_size` argument of
    its init_process_group frame (or, left at -1, of _create_c10d_store), read with py-spy --locals,
    that one argument kept."""

    def frames_in(info) -> list:
        return [(function, end) for function, end in WORLD_SIZE_ARGS if _has_frame(snap, info.pid, function, end)]

    todo = [(p, found) for p in snap.processes if p.role == "rank" and not p.world_size and p.state != "Z"
            for found in [frames_in(p)] if found]  # fmt: skip
    if not todo:
        return
    from debug_stuck.probes.collectors.stacks import frame_arguments

    def world_size(item) -> Optional[int]:
        info, found = item
        for function, end in found:
            size = frame_arguments(info.pid, function, end).get("world_size") or ""
            if size.isdigit() and int(size) > 0:
                return int(size)
        return None

    sizes = _for_each(todo, world_size)
    read = [(info, size) for (info, _), size in zip(todo, sizes) if size]
    for info, size in read:
        info.world_size = size
    if read:
        snap.notes.append(
            f"world size of {len(read)} rank(s) in process-group setup: the world_size argument of "
            "init_process_group (or _create_c10d_store), read with py-spy --locals (only that argument kept)"
        )


def _resolve_waits(snap: Snapshot) -> None:
    """Keep the waits of the threads that matter (the main thread and the Python threads the stacks
    show) and follow each to its object (bounded: one budget for the whole job)."""
    from debug_stuck.probes.collectors.waits import Wait, resolve_waits

    waits = {}
    for info in snap.processes:
        series = snap.stacks.get(info.pid)
        dump = series.latest() if series is not None else None
        wanted = {info.pid} | ({t.tid for t in dump.threads} if dump is not None else set())
        waits[info.pid] = {tid: Wait.from_dict(w) for tid, w in info.waits.items() if tid in wanted}
    try:
        resolve_waits(waits)
    except Exception as exc:  # the chain is a bonus: the report stands without it
        snap.errors.append(f"could not resolve what the threads wait on: {type(exc).__name__}: {exc}")
    for info in snap.processes:
        # a sleep keeps its arguments until live.wakes has read its deadline (and drops them)
        info.waits = {tid: wait.to_dict(with_args=wait.op == "sleep") for tid, wait in waits.get(info.pid, {}).items()}


LOCK_FILE_WAITS = ("build-lock", "flock")


def _file_id(path: str):
    """(device, inode) of a path, or None; bounded: the log may sit on a stalled mount."""
    from debug_stuck.bounded import call_or

    def ident():
        st = os.stat(path)
        return st.st_dev, st.st_ino

    return call_or(None, ident, 1.0, f"stat {path}")


def _not_already_read(given: List[str], files) -> List[str]:
    """The logs the user named that are not the job's own open files already read (`--log train.log`
    for a job whose stdout is /work/run/train.log is one log, read once, not two)."""
    if not given or not files:
        return given
    names = {jf.path for jf in files}
    ids = {i for i in (_file_id(jf.read_path) for jf in files) if i is not None}
    kept = []
    for f in given:
        ident = None if f in names else _file_id(f)
        if f not in names and (ident is None or ident not in ids):
            kept.append(f)
    return kept


def _lock_files(snap: Snapshot) -> None:
    """A thread that polls in a lock-file waiter (frames.yaml: wait build-lock or flock) gets the lock
    file's path and holders in its wait (`lock_file`), read from its frame's locals."""
    from debug_stuck.core.libfacts import match_frame
    from debug_stuck.kb import load_knowledge
    from debug_stuck.live.loops import waits_in_own_code
    from debug_stuck.probes.collectors.lockfiles import lock_files
    from debug_stuck.probes.collectors.stacks import _find_py_spy

    try:
        table = [e for e in load_knowledge().frames if e.get("wait") in LOCK_FILE_WAITS]
    except Exception:  # the knowledge base is checked elsewhere; without it, no lock file
        return
    candidates, native = {}, set()
    for info in snap.processes:
        series = snap.stacks.get(info.pid)
        dump = series.latest() if series is not None else None
        for thread in dump.threads if dump is not None else []:
            wait = info.waits.get(thread.tid) or {}
            if wait.get("op") not in ("sleep", "running", "futex", None):
                continue
            if any(match_frame(table, f.function, f.file) for f in thread.frames if not f.native):
                candidates.setdefault(info.pid, thread.tid)
            elif any(match_frame(table, f.function, None) for f in thread.frames if f.native):
                candidates.setdefault(info.pid, thread.tid)  # a native lock poll (SQLite's busy handler)
                native.add(info.pid)
            elif wait.get("op") == "sleep" and waits_in_own_code(thread.frames) and len(candidates) < OWN_POLLS_READ:
                # a loop of the job's own that sleeps between looks (`while os.path.exists(lock): sleep`):
                # a lock-named path among its locals is the file it waits on
                candidates.setdefault(info.pid, thread.tid)
    if not candidates:
        return
    try:
        found = lock_files(candidates, _find_py_spy(), from_fds=frozenset(native))
    except Exception as exc:  # a bonus: the report stands without it
        snap.errors.append(f"could not read the lock file the job waits on: {type(exc).__name__}: {exc}")
        return
    for pid, described in found.items():
        info = snap.process(pid)
        if info is not None and candidates[pid] in info.waits:
            info.waits[candidates[pid]]["lock_file"] = described
            if described.get("locked_by"):  # a lock another process holds on the file: the chain follows it
                info.waits[candidates[pid]]["lock_holders"] = list(described["locked_by"])


OWN_POLLS_READ = 2  # at most this many processes' locals read for a sleeping loop of the job's own code
OWN_LOOPS_READ = 4  # at most this many source files read for the loop a sleeping thread turns in


def _frame_source(info, frame, sources: dict, limit: int) -> Optional[str]:
    """The text of the file a frame runs, as process `info` sees it (bounded, never run), read once per
    path into `sources` and at most `limit` files; the program of a `python -c` command line for its
    `<string>` frames; None past the limit or for a name that is no path."""
    from debug_stuck.recovery.reading import read_source, seen_from

    if frame.file == "<string>" and "-c" in info.cmdline[:-1]:
        return info.cmdline[info.cmdline.index("-c") + 1]
    pid, path = info.pid, frame.path or frame.file
    if path not in sources and len(sources) < limit and os.path.isabs(path or ""):
        with seen_from(pid):
            sources[path] = read_source(path)
    return sources.get(path)


def _own_loops(snap: Snapshot) -> None:
    """A thread that sleeps in a loop of the job's own code gets the loop's header in its wait
    (`loop`: `while not os.path.exists(done)`), read from the source file (bounded, never run): what
    the loop waits for, where its locals cannot be read (a loop at module level has none). A main
    thread of a process outside any process group also gets the service it calls between sleeps
    (`service`, _answering_service), when one answered moments ago."""
    from debug_stuck.live.jobfacts import in_process_group
    from debug_stuck.live.loops import growing_sleep, library_native_frame, loop_header, waits_in_own_code
    from debug_stuck.probes.collectors.sockets import process_connections

    sources: dict = {}
    services = 0
    for info in snap.processes:
        series = snap.stacks.get(info.pid)
        dump = series.latest() if series is not None else None
        for thread in dump.threads if dump is not None else []:
            wait = info.waits.get(thread.tid)
            if not wait or wait.get("op") != "sleep" or not waits_in_own_code(thread.frames):
                continue
            if library_native_frame(thread.frames) is not None:
                continue  # a library's native code sleeps (sqlite's busy handler retrying a lock): not the loop's
            frame = next(f for f in thread.frames if not f.native)
            source = _frame_source(info, frame, sources, OWN_LOOPS_READ)
            header = loop_header(source, frame.line) if source and frame.line else None
            if header:
                wait["loop"] = header
                delay = growing_sleep(source, frame.line)
                if delay:
                    wait["backoff"] = delay
            if thread.tid == info.pid and services < OWN_LOOPS_READ and not in_process_group(info):
                services += 1  # a rank's process group talks to its peers: no service of the loop's
                service = _answering_service(process_connections(info.pid))
                if service is not None:
                    wait["service"] = service


# a line whose one call is gc.collect(): `gc.collect()`, `n = gc.collect(2)`
GC_CALL_LINE = re.compile(r"^\s*(\w+\s*=\s*)?gc\.collect\([^()]*\)\s*(#.*)?$")


def _gc_calls(snap: Snapshot) -> None:
    """A thread caught at a line whose one call is gc.collect() (the job's code or a library's) runs
    the collector: py-spy shows no frame for a builtin, and the native unwind that would show
    gc_collect_main fails now and then. The collector's frame (`collect`, file `gc`) is put on
    top of that sample's frames, from the source line (bounded, never run)."""
    from debug_stuck.live.gcframes import frames_in_gc
    from debug_stuck.probes.collectors.stacks import Frame

    sources: dict = {}
    lines_of: dict = {}  # a file's lines, split once for every thread and sample caught in it
    for info in snap.processes:
        series = snap.stacks.get(info.pid)
        for dump in series.dumps if series is not None else []:
            for thread in dump.threads:
                python = [f for f in thread.frames if not f.native]
                if not python or python[0].line is None or frames_in_gc(thread.frames):
                    continue
                source = _frame_source(info, python[0], sources, OWN_LOOPS_READ)
                if source not in lines_of:
                    lines_of[source] = source.splitlines() if source else []
                lines = lines_of[source]
                if python[0].line <= len(lines) and GC_CALL_LINE.match(lines[python[0].line - 1]):
                    thread.frames.insert(0, Frame("collect", "gc", None))


PROMPT_CALL = re.compile(r"(?<![\w.])(input|raw_input|getpass(\.getpass)?)\s*\(")


def _stdin_prompts(snap: Snapshot) -> None:
    """A thread reading its standard input at a line of the job's own code that calls input() or
    getpass() gets that line in its wait (`prompt_call`): the read is a question waiting for an
    answer, which no frame shows (py-spy leaves the interpreter's builtin_input out). The line is read
    from the source file, or from the command line of a `python -c` program (bounded, never run)."""
    sources: dict = {}
    for info in snap.processes[: OWN_LOOPS_READ * 4]:
        series = snap.stacks.get(info.pid)
        dump = series.latest() if series is not None else None
        for thread in dump.threads if dump is not None else []:
            wait = info.waits.get(thread.tid)
            frame = next((f for f in thread.frames if not f.native), None)
            if not wait or wait.get("op") != "read" or wait.get("fd") != 0 or frame is None or not frame.line:
                continue
            source = _frame_source(info, frame, sources, OWN_LOOPS_READ * 4) or ""
            lines = source.splitlines()
            line = lines[frame.line - 1].strip() if 0 < frame.line <= len(lines) else ""
            if PROMPT_CALL.search(line):
                wait["prompt_call"] = line[:160]


SERVICE_ANSWERED_MS = 60_000  # a connection that sent and received within this is in use


def _answering_service(connections) -> Optional[dict]:
    """Of a process's established TCP connections, the one that exchanged data most recently, both
    ways, within SERVICE_ANSWERED_MS: a service its sleeping loop calls between sleeps (a retry with
    backoff, a status poll), and that answers."""
    used = [
        c
        for c in connections
        if c["last_received_ms"] < SERVICE_ANSWERED_MS
        and c.get("last_sent_ms", SERVICE_ANSWERED_MS) < SERVICE_ANSWERED_MS
        and c.get("received_total")
    ]
    if not used:
        return None
    best = min(used, key=lambda c: c["last_received_ms"])
    return {k: best[k] for k in ("remote", "last_received_ms", "last_sent_ms") if k in best}


def _refuse_when_nothing_readable(snap: Snapshot) -> None:
    """Exit 3 only when there is nothing left to read: every process exited while we looked.
    Stacks we may not read leave the rest (/proc, logs, GPUs, kernel log): a partial report."""
    series = list(snap.stacks.values())
    if series and all(not s.dumps for s in series) and {s.error_kind for s in series} <= {"gone"}:
        raise NotInspectable("the process(es) exited while being inspected", "nothing left to diagnose")


def _stacks_through_hook(snap: Snapshot, samples: int, window: float) -> None:
    """Where ptrace is denied, a job that installed debug_stuck.hook still gives its stacks: the
    signal its marker names makes it dump every thread (faulthandler), twice a window apart."""
    from debug_stuck.probes.collectors.hook_dump import dump_by_hook, find_marker, read_heartbeat

    for pid, series in list(snap.stacks.items()):
        if series.dumps or series.error_kind != "permission":
            continue
        marker, _ = find_marker(pid)
        if marker is None:
            continue
        info = snap.process(pid)
        label = info.label() if info else str(pid)
        through = dump_by_hook(marker, samples=min(max(samples, 1), 2), interval=window)
        if not through.dumps:
            snap.errors.append(f"{label}: stacks through its debug_stuck.hook: {through.error}")
            continue
        snap.stacks[pid] = through
        snap.notes.append(
            f"{label}: stacks read through its debug_stuck.hook ({marker.signal_name} -> faulthandler), "
            "since ptrace is not allowed here"
        )
        _flight_recorder_through_hook(snap, marker, label)
        beat = read_heartbeat(marker)
        if beat is not None:
            at, step = beat
            snap.heartbeats[pid] = {"at": at, "step": step}
            step_text = f" at step {step}" if step is not None else ""
            ago = max(0.0, time.time() - at)
            snap.notes.append(f"{label}: last heartbeat{step_text}, {ago:.0f} s ago (debug_stuck.hook)")


def _flight_recorder_through_hook(snap: Snapshot, marker, label: str) -> None:
    """Where the job's Flight Recorder is on, the hook writes it next to its stacks on request."""
    from debug_stuck.probes.collectors.hook_dump import request_fr_dump

    path, error = request_fr_dump(marker)
    if path:
        snap.fr_dumps.append(path)
    elif error and "offers no Flight Recorder" not in error:  # FR off in the job: nothing to say
        snap.notes.append(f"{label}: no Flight Recorder dump through its hook: {error}")


def _say_what_is_missing(snap: Snapshot) -> None:
    from debug_stuck.probes.collectors.permissions import ptrace_remedy

    denied = [pid for pid, s in snap.stacks.items() if not s.dumps and s.error_kind == "permission"]
    if not denied:
        return
    series = snap.stacks[denied[0]]
    snap.missing.append(
        {
            "what": f"Python stacks of process(es) {', '.join(map(str, denied))}",
            "why": series.error or "ptrace is not allowed",
            "get_it": ptrace_remedy(denied[0]),
        }
    )
