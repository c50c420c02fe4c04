"""What the report knows about this job, as the values of the playbooks' placeholders and the context
its fixes are chosen by (framework, launcher, platform, backend, OS).

Everything comes from the report itself (processes, chain, logs, resume plan), already redacted;
the script's source is read only to tell the framework, bounded like every other read.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set

from debug_stuck.advice.stdin import stdin_source
from debug_stuck.core.libfacts import sets_nccl
from debug_stuck.core.owncode import entry_script_roots, is_library_code
from debug_stuck.recovery.commandline import option_value, parse_launch
from debug_stuck.recovery.job import TrainingJob

PATH_KINDS = ("fifo", "file", "dir", "device")
RENDEZVOUS_OPTIONS = {
    "master_addr": ("--master_addr", "--master-addr"),
    "master_port": ("--master_port", "--master-port"),
}


@dataclass
class JobFacts:
    values: Dict[str, str] = field(default_factory=dict)  # placeholder name -> value
    context: Dict[str, str] = field(default_factory=dict)  # contract.FIX_CONTEXT key -> detected value
    argv: List[str] = field(default_factory=list)  # the launch command, split
    cwd: Optional[str] = None
    source_files: List[str] = field(default_factory=list)  # the job's own Python files seen on its stacks
    running: bool = False  # the report looked at a live job
    valid_checkpoint: Optional[str] = None  # the one resume starts from: no fix may move or remove it
    uses: Set[str] = field(default_factory=set)  # every framework and fix library the job is seen to use
    # processes with a thread part-way through a write: a command that pauses them would cut it short
    writing_pids: Set[int] = field(default_factory=set)

    def to_dict(self) -> dict:
        return {"values": dict(self.values), "context": dict(self.context)}


def gather_facts(report) -> JobFacts:
    facts = JobFacts()
    processes = list(report.processes or [])
    facts.running = bool(processes)
    by_pid = {p["pid"]: p for p in processes}
    values = facts.values

    facts.writing_pids = {p["pid"] for p in processes if _writes_part_way(p)}
    focus = _focus_pid(report, processes)
    if focus is not None:
        values["pid"] = str(focus)
    root = _root(processes)
    if root is not None:
        values["main_pid"] = str(root["pid"])
    ranks = [p["pid"] for p in processes if p.get("role") == "rank"]
    workers = [p["pid"] for p in processes if p.get("role") in ("dataloader-worker", "worker-process")]
    if ranks:
        values["rank_pids"] = " ".join(map(str, ranks))
        values["nproc"] = str(len(ranks))
    if workers:
        values["worker_pids"] = " ".join(map(str, workers))

    resume = report.resume or {}
    command = resume.get("command") if resume.get("command") else None
    if root is not None and root.get("cmdline"):
        command = root["cmdline"]
    if command:
        facts.argv = command_argv(command)
        values["launch_command"] = command
    facts.cwd = resume.get("cwd") or (root or {}).get("cwd")
    if facts.cwd:
        values["cwd"] = facts.cwd

    # cwd None: the job's folder is unknown, so only absolute paths are read
    job = TrainingJob(facts.argv, facts.cwd, _env(processes)) if facts.argv else None
    if job is not None:
        if job.script_file or job.launch.script:
            values["script"] = job.script_file or job.launch.script
        outputs = job.output_dirs() if facts.cwd else []
        if outputs:
            values["output_dir"] = outputs[0]
        facts.context["launcher"] = job.launch.launcher
        if job.launch.nnodes:
            values["nnodes"] = job.launch.nnodes
        if job.launch.nproc and "nproc" not in values:
            values["nproc"] = str(job.launch.nproc)  # per node, as the launcher was told
        if _python(job.launch.argv):
            values["python"] = _python(job.launch.argv)
    if resume.get("framework"):
        facts.context["framework"] = resume["framework"]
    elif job is not None:
        from debug_stuck.recovery import frameworks

        facts.context["framework"] = frameworks.detect(job)
    paths = _frame_paths(processes)
    facts.uses = _frameworks_used(paths, job, facts.context.get("framework")) | _libraries_used(report, paths, job)

    facts.valid_checkpoint = resume.get("checkpoint")
    checkpoint = facts.valid_checkpoint
    if not checkpoint and resume.get("skipped"):
        checkpoint = resume["skipped"][0].get("path")
    if checkpoint:
        values["checkpoint"] = checkpoint
    blocked = _blocked_path(report.chain)
    if blocked:
        values["blocked_path"] = blocked
    writer = _output_writer(report.chain)
    if writer is not None or focus is not None:
        values["writer_pid"] = str(writer["pid"] if writer is not None else focus)
        blocked_fd = _raw_wait(writer, by_pid).get("fd") if writer is not None else None
        blocked_fd = blocked_fd if isinstance(blocked_fd, int) else None
        values["blocked_fd"] = str(blocked_fd if blocked_fd is not None else 1)  # stdout, where no chain says
        if blocked_fd is not None:
            facts.context["stream"] = "std" if blocked_fd in (1, 2) else "other"
    reader = _pipe_reader(report.chain, by_pid)
    if facts.context.get("stream") == "std" and reader is not None and _waits_for_writer(report.chain, reader, writer):
        facts.context["stream"] = "captured"  # subprocess.PIPE: the job's own process reads it, after a wait
    if reader is not None:
        values["reader_pid"] = str(reader["pid"])
        if reader.get("state"):
            facts.context["reader"] = "stopped" if reader["state"] in ("T", "t") else "running"
    wait = _wait_kind(report.chain)
    if wait:
        facts.context["wait"] = wait
    scheduler = _scheduler(processes)
    if scheduler:
        facts.context["scheduler"] = scheduler
    stdin = stdin_source(report.chain, by_pid, _raw_wait)
    if stdin:
        facts.context["stdin"] = stdin
    partial = _partial_checkpoint(_blocked_save(report.chain), resume)
    if partial:
        values["partial_checkpoint"] = partial
    _flight_recorder(values, processes)
    log = _log(report, processes)
    if log:
        values["log"] = log
    _rendezvous(values, facts.argv, processes)

    platform = (report.answers.get("platform") or {}).get("value")
    if platform in ("cuda", "rocm", "cpu"):
        facts.context["platform"] = platform
    backend = _backend(processes)
    if backend:
        facts.context["backend"] = backend
    if facts.running:
        facts.context["os"] = {"win32": "windows", "darwin": "macos"}.get(sys.platform, "linux")
    values["threads_per_process"] = str(_threads_per_process(processes, focus) if facts.running else 1)
    facts.source_files = _user_files(processes, by_pid)
    stack = _stack(report, paths, job)
    if stack:
        facts.context["stack"] = stack
    stopped_in = _stopped_in(report, processes)
    if stopped_in:
        facts.context["stopped_in"] = stopped_in
    if _busy_in_regex(processes):
        facts.context["busy_in"] = "regex"
    return facts


def _busy_in_regex(processes) -> bool:
    """A thread of the job was caught in the regular-expression engine (frames.yaml fact `regex`):
    its Python frames (re's module functions) or its native ones (_sre's match and search)."""
    from debug_stuck.core.libfacts import proven_facts
    from debug_stuck.kb import load_table

    frames = [
        (f.get("function") or "", f.get("file"))
        for p in processes
        for t in p.get("threads") or []
        for f in (t.get("frames") or [])[:4]
    ]
    return bool(frames) and "regex" in proven_facts(load_table("frames.yaml").get("frames") or [], frames)


def command_argv(cmdline) -> List[str]:
    """A command line as its words: the report keeps one as a string (shlex-joined), a snapshot as a
    list; a string shlex cannot split (an unbalanced quote) is split on spaces."""
    if isinstance(cmdline, str):
        try:
            return shlex.split(cmdline)
        except ValueError:
            return cmdline.split()
    return list(cmdline or [])


def _wait_kind(chain) -> Optional[str]:
    """ "lock" when the job's wait ends at threads holding each other's locks, or at a lock or
    condition the chain could not follow further; "other" when it ends anywhere else (a queue, a
    join, a fork-held or self-held lock: each with a fix of its own); None with no chain."""
    if not chain:
        return None
    if any((hop.get("waits_on") or {}).get("kind") == "lock-cycle" for hop in chain):
        return "lock"
    end = chain[-1].get("waits_on") or {}
    unfollowed = end.get("kind") == "futex" and not end.get("end")
    return "lock" if unfollowed and "a lock or condition" in (end.get("detail") or "") else "other"


def _stopped_in(report, processes) -> Optional[str]:
    """ "debugger" when a stack of the job (live, or a dump pasted in its log) is in pdb's prompt
    (frames.yaml fact `debugger`), "elsewhere" when stacks were read and none is; None with no stack."""
    from debug_stuck.core.libfacts import proven_facts
    from debug_stuck.kb import load_table

    pasted = [log.get("stack_facts") or [] for log in report.logs or [] if log.get("stack_facts")]
    if any("debugger" in facts for facts in pasted):
        return "debugger"
    threads = [t for p in processes for t in p.get("threads") or []]
    frames = [
        (f.get("function") or "", f.get("file")) for t in threads for f in t.get("frames") or [] if not f.get("native")
    ]
    if "debugger" in proven_facts(load_table("frames.yaml").get("frames") or [], frames):
        return "debugger"
    return "elsewhere" if pasted or frames else None


def _frame_paths(processes) -> List[str]:
    """Every file name on the job's stacks, as py-spy shortens it and in full, once each ("/"
    separators): what the library and framework tests below search."""
    out = {}
    for p in processes:
        for thread in p.get("threads") or []:
            for frame in thread.get("frames") or []:
                for where in (frame.get("file"), frame.get("path")):
                    if where:
                        out[str(where).replace("\\", "/")] = None
    return list(out)


def in_package(where: str, package: str) -> bool:
    """A file of `package` (py-spy's short name, or a full path through its folder)."""
    return re.search(rf"(?:^|/){re.escape(package)}/", where) is not None


def _stack(report, paths: List[str], job: Optional[TrainingJob]) -> Optional[str]:
    """The library the job trains with, from its library frames, its script's imports and the
    libraries whose messages its logs hold (skills/data/log-catalog.yaml `stacks`); None when none
    of them says (a fix that calls torch is then presumed to apply)."""
    from debug_stuck.kb import load_table

    stacks = load_table("log-catalog.yaml").get("stacks") or {}
    of_package = {package: stack for stack, spec in stacks.items() for package in spec.get("packages") or ()}
    of_library = {library: stack for stack, spec in stacks.items() for library in spec.get("libraries") or ()}
    if not of_package:
        return None
    names = "|".join(map(re.escape, of_package))
    in_file = re.compile(rf"(?:^|(?:site|dist)-packages/)({names})/")  # py-spy's short path, or site-packages
    imported = re.compile(rf"^\s*(?:import|from)\s+({names})\b", re.M)
    # The code the job runs now tells first, then what its script imports (a script may import two
    # stacks, one of them only in a branch), then the libraries its log's messages come from.
    running, imports, logged = set(), set(), set()
    for where in paths:
        found = in_file.search(where)
        if found:
            running.add(of_package[found.group(1)])
    if job is not None and job.source:
        imports.update(of_package[name] for name in imported.findall(job.source))
    for log in report.logs or []:
        logged.update(of_library[name] for name in log.get("libraries") or () if name in of_library)
    for seen in (running, imports, logged):
        found = next((stack for stack in stacks if stack in seen), None)
        if found:
            return found
    return None


# A framework's own files on a stack (py-spy's short path, or site-packages): the job runs it.
FRAMEWORK_FILES = (
    ("accelerate", re.compile(r"(?:^|/)accelerate/")),
    ("lightning", re.compile(r"(?:^|/)(?:lightning|pytorch_lightning|lightning_fabric)/")),
    ("hf-trainer", re.compile(r"(?:^|/)(?:transformers/trainer\w*\.py|trl/trainer/)")),
    ("ultralytics", re.compile(r"(?:^|/)ultralytics/")),
)


# Frameworks that drive accelerate themselves: its frames under them are theirs, and its fixes (an
# Accelerator(...) of the job's own) are not for their users.
SPECIFIC_OVER_ACCELERATE = {"hf-trainer", "kohya"}


def _frameworks_used(paths: List[str], job: Optional[TrainingJob], checkpoints: Optional[str] = None) -> Set[str]:
    """Every framework the job is seen to use: its library frames, its script's imports, its
    launcher. `checkpoints`: the framework its checkpoints follow (context["framework"])."""
    from debug_stuck.recovery import frameworks
    from debug_stuck.recovery.source import imports

    used = {name for name, pattern in FRAMEWORK_FILES if any(pattern.search(where) for where in paths)}
    if job is not None and job.source:
        used.update(name for name, claims in frameworks.SOURCE_CHECKS if claims(job))
    if job is not None and (job.launch.launcher == "accelerate" or (job.source and imports(job.source, "accelerate"))):
        used.add("accelerate")
    if used & SPECIFIC_OVER_ACCELERATE or checkpoints in SPECIFIC_OVER_ACCELERATE:
        used.discard("accelerate")  # the HF Trainer and kohya drive accelerate, with settings of their own
    return used


def _libraries_used(report, paths: List[str], job: Optional[TrainingJob]) -> Set[str]:
    """The libraries fixes may be about (contract.FIX_CONTEXT["uses"]) that the job is seen to use:
    their files on its stacks, its script's imports, its log's messages (logs[].libraries)."""
    from debug_stuck.contract import FIX_CONTEXT
    from debug_stuck.recovery.source import imports

    used = set()
    for library in FIX_CONTEXT["uses"]:
        if any(in_package(where, library) for where in paths):
            used.add(library)
        if job is not None and job.source and imports(job.source, library):
            used.add(library)
        if any(library in (log.get("libraries") or ()) for log in report.logs or []):
            used.add(library)
    return used


def _writes_part_way(process: dict) -> bool:
    from debug_stuck.probes.collectors.stacks import PARTIAL_WRITE_WAITS

    waits = [process.get("wchan"), *(process.get("thread_wchans") or {}).values()]
    return any(w in PARTIAL_WRITE_WAITS for w in waits if w)


def _output_writer(chain) -> Optional[dict]:
    """The hop blocked writing a pipe, FIFO or terminal: the job's output is stuck there, whoever the
    chain goes on to (the pipe's reader)."""
    for hop in chain or []:
        waits = hop.get("waits_on") or {}
        if waits.get("kind") in ("pipe", "fifo", "tty") and waits.get("op") == "write" and hop.get("pid"):
            return hop
    return None


def _raw_wait(hop: dict, by_pid: Dict[int, dict]) -> dict:
    """The wait of a hop's thread as the report's processes hold it ({} when it was not read)."""
    tid = (hop.get("thread") or {}).get("tid") or hop.get("pid")
    return ((by_pid.get(hop.get("pid")) or {}).get("waits") or {}).get(str(tid)) or {}


def _waits_for_writer(chain, reader: dict, writer: Optional[dict]) -> bool:
    """The pipe's reader is a process of the chain that waits, before the writer's hop: a parent that
    captured its child's output and waits for it (Popen(stdout=PIPE) then wait())."""
    pids = [hop.get("pid") for hop in chain or []]
    at = pids.index(writer["pid"]) if writer is not None and writer.get("pid") in pids else len(pids)
    return reader.get("pid") in pids[:at]


def _pipe_reader(chain, by_pid: Dict[int, dict]) -> Optional[dict]:
    """The process holding the read end of the pipe or FIFO a hop of the chain is blocked writing
    ({"pid", "state"}: its state as the wait's reading saw it)."""
    for hop in chain or []:
        waits = hop.get("waits_on") or {}
        if waits.get("kind") not in ("pipe", "fifo") or waits.get("op") != "write":
            continue
        for peer in _raw_wait(hop, by_pid).get("peers") or []:
            if peer.get("mode") in ("r", "rw") and peer.get("pid") != hop.get("pid"):
                return peer
    return None


def _threads_per_process(processes: List[dict], pid: Optional[int]) -> int:
    """The CPUs the job may use (its process's affinity, else this machine's) shared among its ranks
    and their DataLoader workers: cores / (ranks x (1 + workers per rank)), at least 1."""
    try:
        cores = len(os.sched_getaffinity(pid or 0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    ranks = max(1, sum(1 for p in processes if p.get("role") == "rank"))
    workers = sum(1 for p in processes if p.get("role") == "dataloader-worker") // ranks
    return max(1, cores // (ranks * (1 + workers)))


def _focus_pid(report, processes) -> Optional[int]:
    """The process the checks look at: the one at the end of the wait (the blocked worker, the
    culprit's own blocker), else the culprit, else the first rank."""
    chain = [hop for hop in report.chain or [] if hop.get("pid")]
    if chain and (chain[-1].get("waits_on") or {}).get("kind") != "cycle":
        return chain[-1]["pid"]
    if len(chain) >= 2:  # a cycle: the hop that closes it is blocked in the kernel (a full pipe, a lock)
        return chain[-2]["pid"]
    if report.culprit and report.culprit.get("pid"):
        return report.culprit["pid"]
    for hop in chain:
        return hop["pid"]
    ranks = [p for p in processes if p.get("role") == "rank"]
    if ranks:
        return ranks[0]["pid"]
    return processes[0]["pid"] if processes else None


def _root(processes) -> Optional[dict]:
    pids = {p["pid"] for p in processes}
    tops = [p for p in processes if p.get("ppid") not in pids]
    launchers = [p for p in tops if p.get("role") == "launcher"]
    return (launchers or tops or [None])[0]


def _scheduler(processes) -> Optional[str]:
    """slurm or ray from the job's environment (SLURM_JOB_ID; RAY_ADDRESS or RAY_RAYLET_PID, which Ray sets
    in its workers); none when the environment was read and has neither; None when it was not read."""
    if not any(p.get("env") is not None for p in processes):
        return None
    env = _env(processes)
    if env.get("SLURM_JOB_ID"):
        return "slurm"
    if env.get("RAY_ADDRESS") or env.get("RAY_RAYLET_PID"):
        return "ray"
    return "none"


def _env(processes) -> Dict[str, str]:
    env: Dict[str, str] = {}
    for p in processes:
        for key, value in (p.get("env") or {}).items():
            env.setdefault(key, value)
    return env


def _python(argv: List[str]) -> Optional[str]:
    if argv and "python" in os.path.basename(argv[0]).lower():
        return argv[0]
    return None


def _blocked_path(chain) -> Optional[str]:
    for hop in chain or []:
        waits = hop.get("waits_on") or {}
        if hop.get("terminal") and waits.get("kind") in PATH_KINDS and str(waits.get("object", "")).startswith("/"):
            return waits["object"]
    return None


def _partial_checkpoint(blocked: Optional[str], resume: dict) -> Optional[str]:
    """The file a hung save left half-written: the one it is blocked on, else one that resume skipped
    for failing its checks. Never the checkpoint resume judges valid."""
    valid = resume.get("checkpoint")
    candidates = [blocked] + [s.get("path") for s in resume.get("skipped") or [] if isinstance(s, dict)]
    for path in candidates:
        if path and path != valid and not _same_file(path, valid):
            return path
    return None


def _same_file(a: str, b: Optional[str]) -> bool:
    # by name only: a stat could hang on the very mount the save is stuck on
    return bool(b) and os.path.normpath(a) == os.path.normpath(b)


SAVE_FRAME = re.compile(r"(?i)\bsave|serializ|checkpoint|_write_file|safetensors")
CHECKPOINT_NAME = re.compile(r"(?i)\.(pt|pth|ckpt|safetensors|bin|pkl|pickle|h5|npz)$|ckpt|checkpoint")


def _blocked_save(chain) -> Optional[str]:
    """The file the chain ends on, when what is blocked on it is a save (a save frame, or a
    checkpoint's name): a data file a loader waits on is not a partial checkpoint."""
    for hop in chain or []:
        waits = hop.get("waits_on") or {}
        path = str(waits.get("object", ""))
        if not (hop.get("terminal") and waits.get("kind") in PATH_KINDS and path.startswith("/")):
            continue
        if SAVE_FRAME.search(str(hop.get("where") or "")) or CHECKPOINT_NAME.search(os.path.basename(path)):
            return path
    return None


def _flight_recorder(values: Dict[str, str], processes) -> None:
    """Where the job's Flight Recorder dumps go, and the pipe that makes a rank dump it now."""
    from debug_stuck.probes.collectors.flight_recorder import dump_locations

    for p in processes:
        if p.get("role") != "rank" or not p.get("env"):
            continue
        where = dump_locations(p["env"], p.get("rank"))
        values.setdefault("fr_dumps", where["prefix"])
        if where.get("pipe"):
            values.setdefault("fr_pipe", where["pipe"])
            return


def _log(report, processes) -> Optional[str]:
    for entry in report.logs or []:
        if entry.get("path"):
            return entry["path"]
    for p in processes:
        for fd in ("fd1", "fd2"):
            target = p.get(f"{fd}_target")
            if p.get(fd) == "file" and target and target.startswith("/"):
                return target
    return None


def _rendezvous(values: Dict[str, str], argv: List[str], processes) -> None:
    env = _env(processes)
    for name, options in RENDEZVOUS_OPTIONS.items():
        value = option_value(argv, *options) if argv else None
        value = value or env.get(name.upper())
        if value:
            values[name] = value
    endpoint = option_value(argv, "--rdzv_endpoint", "--rdzv-endpoint") if argv else None
    if endpoint and ":" in endpoint:
        host, _, port = endpoint.rpartition(":")
        values.setdefault("master_addr", host)
        values.setdefault("master_port", port)


def _backend(processes) -> Optional[str]:
    for p in processes:
        env = p.get("env") or {}
        for thread in p.get("threads") or []:
            for frame in thread.get("frames") or []:
                text = f"{frame.get('function', '')} {frame.get('file', '')}".lower()
                if "gloo" in text:
                    return "gloo"
                if "nccl" in text:
                    return "nccl"
        if sets_nccl(env):
            return "nccl"
    return None


def _user_files(processes, by_pid) -> List[str]:
    """The job's own Python files on its stacks: not the standard library, not site-packages."""
    out: List[str] = []
    roots = own_code_roots(processes)
    for p in processes:
        for thread in p.get("threads") or []:
            for frame in thread.get("frames") or []:
                path = frame.get("path") or frame.get("file") or ""
                if frame.get("native") or not path.endswith(".py") or not os.path.isabs(path):
                    continue
                if is_library_frame(frame, roots) or path in out:
                    continue
                out.append(path)
    return out


def is_library_frame(frame: dict, own_roots: Sequence[str] = ()) -> bool:
    """A frame (a report's dict) of the standard library or a library, not the job's own code; under
    the job's own folders (`own_roots`, see own_code_roots) a short name is the job's (core.owncode)."""
    return is_library_code(frame.get("file"), frame.get("path"), own_roots)


def own_code_roots(processes) -> List[str]:
    """The folders of the job's entry scripts: the file of each thread's outermost `<module>` frame
    that is not an installed package's."""
    outer = []
    for p in processes or []:
        for thread in p.get("threads") or []:
            python = [f for f in thread.get("frames") or [] if not f.get("native")]
            if python and python[-1].get("function") == "<module>":
                outer.append(str(python[-1].get("path") or ""))
    return entry_script_roots(outer)


__all__ = [
    "JobFacts",
    "gather_facts",
    "in_package",
    "is_library_frame",
    "own_code_roots",
    "parse_launch",
]
