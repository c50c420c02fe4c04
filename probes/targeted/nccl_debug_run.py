"""nccl-debug-run: re-run the launch command with the distributed debug switches on and read how far it gets.

The command (`-- CMD ...`, or the command line of a live job given with `--pid`) runs for a bounded
time with NCCL_DEBUG=INFO (INIT, COLL), TORCH_DISTRIBUTED_DEBUG=DETAIL, TORCH_CPP_LOG_LEVEL=INFO and
the Flight Recorder on; at the limit its whole process tree is killed (torchrun's ranks live in
sessions of their own, so they are found and killed by PID). The output is parsed line by line, as
it arrives, into:

- the stage reached: launched -> rendezvous (c10d TCPStore) -> comm-init (NCCL bootstrap / gloo
  address exchange; `comm_init_complete` once "Init COMPLETE") -> first-collective (NCCL COLL lines,
  DETAIL's collective fingerprints) -> finished (exit status 0);
- the network: interfaces NCCL chose, IB or sockets, the P2P/SHM/NET transports of its channels;
- errors: collective mismatches found by DETAIL, watchdog timeouts, TCPStore timeouts, NCCL WARN
  lines, the last line of every traceback, store keys that ranks wait for and nobody ever sets.

Re-running a live job's command would collide with it on MASTER_PORT, so in `--pid` mode the port
is replaced by a free one (and said so). The user's files are not touched; the Flight Recorder's
dumps go to a temporary folder that is removed unless dumps were written.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import time
from typing import Dict, List, Optional, Tuple

from debug_stuck.bounded import (
    CallTimedOut,
    call_with_timeout,
    keep_scratch,
    remove_scratch,
    run_command,
    run_tree,
    scratch_dir,
)
from debug_stuck.probes.targeted.base import (
    OOM_CHECK,
    Finding,
    ProbeContext,
    ProbeResult,
    ProbeUsageError,
    signal_name,
)
from debug_stuck.probes.targeted.nccl_log import STAGES, TRACE_NOISE, NcclLog

NAME = "nccl-debug-run"
FR_PREFIX = "nccl_trace_rank_"
DEBUG_ENV = {
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_SUBSYS": "INIT,COLL",
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    "TORCH_CPP_LOG_LEVEL": "INFO",
    "TORCH_FR_BUFFER_SIZE": "2000",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    "PYTHONUNBUFFERED": "1",
}
PROC_SECONDS = 2.0


# --- verdict ------------------------------------------------------------------------------------

_STALL_CAUSE = {
    "launched": "model-init",
    "rendezvous": "rendezvous",
    "comm-init": "nccl-init",
}


# A run cut at its limit is judged only when its output had stopped for this long (a job still
# printing is starting up or working, not hung), or when the output itself shows the hang.
STALL_SILENCE_S = 15.0


def _signal_death(log: NcclLog) -> Optional[Tuple[str, Finding]]:
    """(summary, finding) when the launcher's root cause is a rank killed by a signal: the real
    cause, whatever the surviving ranks report about their lost peer afterwards."""
    code = log.root_cause.get("exitcode")
    if code is None or code >= 0:
        return None
    name = signal_name(-code)
    killed = f"rank {log.root_cause.get('rank', '?')} was killed by {name}"
    if name == "SIGKILL":
        finding = Finding(
            "fail",
            f"{killed} (exit code {code}), most likely the kernel's OOM killer: see {OOM_CHECK}; "
            "the other ranks' errors follow from it",
            "memory-pressure",
        )
    else:
        finding = Finding("fail", f"{killed} (exit code {code}); the other ranks' errors follow from it")
    return killed, finding


def judge(
    log: NcclLog, exit_code: Optional[int], timed_out: bool, seconds: float, silent_for: Optional[float] = None
) -> Tuple[str, str, List[Finding]]:
    """(status, summary, findings) from a parsed run. `silent_for`: how long the output had been
    quiet when the run ended (None: as long as it ran)."""
    stage = log.stage(exit_code)
    findings: List[Finding] = []
    silent = seconds if silent_for is None else silent_for
    death = _signal_death(log)
    if death is not None:
        killed, finding = death
        return "fail", f"{killed} (reached {stage})", [finding] + list(log.errors)
    gap = log.sequence_gap()
    if gap is not None and timed_out and not log.errors and silent >= STALL_SILENCE_S:
        behind, number, op, ahead = gap
        names = ", ".join(str(r) for r in behind)
        waiting = ", ".join(str(r) for r in ahead)
        msg = (
            f"collective hang: rank(s) {names} never entered collective #{number} ({op}) that rank(s) {waiting} "
            f"wait in (collective fingerprints, TORCH_DISTRIBUTED_DEBUG=DETAIL); no output for {silent:.0f} s"
        )
        findings.append(Finding("fail", msg, "collective"))
        return "fail", f"collective hang: rank(s) {names} never entered collective #{number} ({op})", findings
    missing = log.missing_ranks()
    if log.store_barrier and log.store_barrier[1] < log.store_barrier[0]:
        findings.append(
            Finding(
                "warn",
                f"store-based barrier: only {log.store_barrier[1]} of {log.store_barrier[0]} ranks joined",
                "rendezvous",
            )
        )
    if log.errors:
        findings = list(log.errors) + findings
        primary = _primary(log.errors)
        if log.root_cause.get("rank") is not None:
            findings.append(
                Finding(
                    "info",
                    f"the launcher reports rank {log.root_cause['rank']} failed first "
                    f"(exit code {log.root_cause.get('exitcode', '?')})",
                    primary.cause,
                )
            )
        return "fail", f"{primary.message} (reached {stage})", findings
    if stage == "finished":
        return "ok", f"finished (exit 0) after {log.collectives} collective(s); no distributed errors", findings
    if not timed_out:
        msg = f"exited with status {exit_code} at stage {stage} without a recognized distributed error"
        if log.tail:
            msg += f"; last line: {log.tail[-1][:200]}"
        findings.append(Finding("fail", msg, None))
        if log.root_cause.get("rank") is not None:
            findings.append(
                Finding(
                    "info",
                    f"the launcher reports rank {log.root_cause['rank']} failed first "
                    f"(exit code {log.root_cause.get('exitcode', '?')})",
                )
            )
        return "fail", f"exited with status {exit_code} at stage {stage}", findings
    if stage == "first-collective":
        return (
            "ok",
            f"reached the first collective ({log.first_collective}; {log.collectives} seen), no errors; "
            f"still running at the {seconds:.0f} s limit",
            findings,
        )
    if missing:
        names = ", ".join(str(r) for r in missing)
        findings.append(
            Finding(
                "warn",
                f"ranks wait in the c10d store for rank(s) {names}, which never published their address: "
                f"never launched, crashed early, or a WORLD_SIZE larger than the ranks started "
                f"(keys: {', '.join(log.missing_keys()[:3])})",
                "rendezvous",
            )
        )
        cause = "rendezvous"
    elif stage == "comm-init" and log.comm_init_complete:
        cause = "collective"
    else:
        cause = _STALL_CAUSE.get(stage, "rendezvous")
    if not missing and silent < STALL_SILENCE_S:
        # still printing when the limit came: starting up or working, not shown to hang
        findings.append(
            Finding(
                "info",
                f"at stage {stage} when the {seconds:.0f} s limit came, with output {silent:.0f} s before it: "
                "rerun with a longer --timeout",
            )
        )
        return "timeout", f"out of time at stage {stage} with no sign of a hang (after {seconds:.0f} s)", findings
    where = {
        "launched": "before the rendezvous (no c10d store activity: imports, data or model setup, "
        "or init_process_group never called)",
        "rendezvous": "in the rendezvous (c10d store reached, the process group never formed)",
        "comm-init": (
            "after communicator init, before the first collective"
            if log.comm_init_complete
            else "in communicator init (NCCL bootstrap / gloo connect never completed)"
        ),
    }[stage]
    findings.append(Finding("warn", f"stalled {where} for {seconds:.0f} s", cause))
    if missing:
        names = ", ".join(str(r) for r in missing)
        return "warn", f"stalled at stage {stage}: the ranks wait for rank(s) {names}, which never joined", findings
    return "warn", f"stalled at stage {stage}: {where}", findings


_PRIMARY_ORDER = (
    "collective mismatch",
    "NCCL watchdog",
    "c10d store",
    "the c10d store port",
    "NCCL",
    "gloo could not connect",
    "raised",  # a rank's own exception: the peers' barrier and recv failures follow from it
    "collective timed out",
)


def _primary(errors: List[Finding]) -> Finding:
    """The error that explains the others: a named distributed failure first, then a rank's own
    exception, and a lost gloo peer (what the survivors of a crashed rank report) last."""

    def rank(f: Finding) -> int:
        text = re.sub(r"^(\[rank\d+\]:|rank \d+)\s*", "", f.message)
        for i, head in enumerate(_PRIMARY_ORDER):
            if text.startswith(head):
                return i
        return len(_PRIMARY_ORDER) + (1 if f.message.startswith("gloo peer") else 0)

    return min(errors, key=rank)


# --- the command --------------------------------------------------------------------------------


def job_torch_version(exe: str, env: Dict[str, str]) -> Optional[Tuple[int, int]]:
    """The torch version the job's interpreter has (a launcher script's shebang names it), read
    from the package metadata without importing torch; None when it cannot be told."""
    python = exe
    if "python" not in os.path.basename(exe):
        try:
            with open(exe, "rb") as fh:
                first = fh.readline(300).decode("utf-8", "replace")
        except OSError:
            return None
        if not first.startswith("#!") or "python" not in first:
            return None
        python = first[2:].split()[0]
        if python.endswith("/env"):
            python = shutil.which(first[2:].split()[1], path=env.get("PATH")) or ""
    if not python:
        return None
    code = "import importlib.metadata as m; print(m.version('torch'))"
    try:
        result = run_command([python, "-c", code], 10.0, env=env)
    except OSError:
        return None
    m = re.match(r"(\d+)\.(\d+)", result.stdout.strip()) if result.ok else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def _port_taken(log: NcclLog) -> bool:
    return any("already in use" in finding.message for finding in log.errors)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_LAUNCHER = re.compile(
    r"torch\.distributed\.(run|launch)|(^|/)torchrun\b|accelerate(/commands/launch|\s+launch)|(^|/)deepspeed\b|"
    r"deepspeed\.launcher|torchelastic"
)
_PORT_FLAGS = ("--master_port", "--master-port")
_ENDPOINT_FLAGS = ("--rdzv_endpoint", "--rdzv-endpoint")


def replace_port(argv: List[str], env: Dict[str, str], port: int) -> Tuple[List[str], Dict[str, str], List[str]]:
    """Point the command at another rendezvous port; returns (argv, env, what changed)."""
    out, changed = [], []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        name, eq, value = arg.partition("=")
        if name in _PORT_FLAGS:
            if eq:
                out.append(f"{name}={port}")
            elif i + 1 < len(argv):
                out += [name, str(port)]
                skip = True
            changed.append(f"{name} -> {port}")
            continue
        if name in _ENDPOINT_FLAGS:
            current = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            host = current.rsplit(":", 1)[0] if ":" in current else current
            new = f"{host}:{port}"
            out += [f"{name}={new}"] if eq else [name, new]
            skip = not eq
            changed.append(f"{name} -> {new}")
            continue
        out.append(arg)
    env = dict(env)
    if "MASTER_PORT" in env:
        env["MASTER_PORT"] = str(port)
        changed.append(f"MASTER_PORT -> {port}")
    return out, env, changed


def command_from_pid(pid: int) -> dict:
    """The launch command of a live job from one of its PIDs: the launcher's when there is one.

    Returns {"argv", "cwd", "env", "pid", "role", "alive"}; raises ProbeUsageError when it cannot
    be read.
    """
    import psutil

    def read(p):
        with p.oneshot():
            return p.cmdline(), p.cwd(), p.environ(), p.ppid()

    def bounded(p):
        try:
            return call_with_timeout(lambda: read(p), PROC_SECONDS, f"reading process {p.pid}")
        except psutil.NoSuchProcess:
            raise ProbeUsageError(f"process {p.pid} does not exist (it may have exited)") from None
        except psutil.AccessDenied:
            raise ProbeUsageError(
                f"permission denied reading process {p.pid} (run as the job's user or root)"
            ) from None
        except CallTimedOut as exc:
            raise ProbeUsageError(f"{exc}: the process may be in uninterruptible sleep") from None

    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        raise ProbeUsageError(f"process {pid} does not exist (it may have exited)") from None
    argv, cwd, env, ppid = bounded(proc)
    role = "launcher" if _LAUNCHER.search(" ".join(argv)) else "process"
    chosen = (proc.pid, argv, cwd, env)
    # A rank or a worker: its launcher (up to 3 levels up) is what the user started.
    cur_ppid = ppid
    for _ in range(3):
        if role == "launcher" or cur_ppid <= 1:
            break
        try:
            parent = psutil.Process(cur_ppid)
            pargv, pcwd, penv, pppid = bounded(parent)
        except (ProbeUsageError, psutil.Error):
            break
        if _LAUNCHER.search(" ".join(pargv)):
            chosen, role = (parent.pid, pargv, pcwd, penv), "launcher"
            break
        cur_ppid = pppid
    if not chosen[1]:
        raise ProbeUsageError(f"process {pid} has an empty command line (a kernel thread or a zombie)")
    return {"pid": chosen[0], "argv": list(chosen[1]), "cwd": chosen[2], "env": dict(chosen[3]), "role": role}


# --- run ----------------------------------------------------------------------------------------


def run(ctx: ProbeContext) -> ProbeResult:
    notes: List[str] = []
    changed: List[str] = []  # the rendezvous settings moved to a free port (a live job's re-run)
    if ctx.command:
        argv = list(ctx.command)
        cwd = ctx.cwd
        env = dict(os.environ)
        source = "command"
    elif ctx.pids:
        job = command_from_pid(ctx.pids[0])
        argv, cwd, env = job["argv"], job["cwd"], job["env"]
        source = f"pid {job['pid']} ({job['role']})"
        # The launcher sets these for its children; a fresh launcher must set its own.
        env = {k: v for k, v in env.items() if not k.startswith("TORCHELASTIC_")}
        if job["role"] != "launcher":
            notes.append(
                "no launcher found above the process: only this one process is re-run, so it will wait for its peers"
            )
        # The live job still holds its rendezvous port.
        argv, env, changed = replace_port(argv, env, free_port())
        if changed:
            notes.append("rendezvous port replaced to avoid the live job's: " + ", ".join(changed))
    else:
        raise ProbeUsageError(
            "give the launch command after --, e.g. `probe nccl-debug-run --allow-exec -- torchrun "
            "--nproc_per_node=2 train.py`, or --pid P of a running job"
        )
    if os.sep in argv[0]:
        exe = argv[0] if os.path.isabs(argv[0]) else os.path.join(cwd or os.getcwd(), argv[0])
    else:
        exe = shutil.which(argv[0], path=env.get("PATH"))
    if exe is None or not os.path.exists(exe):
        raise ProbeUsageError(f"cannot run {argv[0]!r}: not found on PATH")

    tmp = scratch_dir("debug-stuck-nccl-")
    added = dict(DEBUG_ENV)
    added["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(tmp, FR_PREFIX)
    version = job_torch_version(exe, env)
    if version is None or version < (2, 5):
        # the names before torch 2.5; newer torch warns that they are deprecated
        added["TORCH_NCCL_TRACE_BUFFER_SIZE"] = added["TORCH_FR_BUFFER_SIZE"]
        added["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = os.path.join(tmp, FR_PREFIX)
    env.update(added)
    limit = max(1.0, ctx.timeout - min(2.0, ctx.timeout * 0.05))
    ctx.progress(f"running {os.path.basename(argv[0])} with NCCL_DEBUG=INFO for up to {limit:.0f} s")
    deadline = time.monotonic() + limit
    for attempt in (1, 2):
        log = NcclLog()
        started = time.monotonic()
        last_output = [started]

        def on_line(line: str, log=log, last_output=last_output) -> None:
            log.feed(line)
            if line.strip() and not TRACE_NOISE.search(line):
                last_output[0] = time.monotonic()

        try:
            result = run_tree(argv, max(1.0, deadline - started), env=env, cwd=cwd, on_line=on_line)
        except OSError as exc:
            remove_scratch(tmp)
            raise ProbeUsageError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
        if attempt == 2 or not (changed and _port_taken(log)):
            break
        # The port free_port() found was taken before the run bound it (another program got it
        # between the two): that is our doing, not the job's, so run once more on another.
        argv, env, changed = replace_port(argv, env, free_port())
        notes.append("the first free port was taken before the run could bind it; ran again on another")
    dumps = sorted(os.path.join(tmp, n) for n in os.listdir(tmp) if n.startswith(FR_PREFIX))
    if dumps:
        keep_scratch(tmp)  # the report points at the Flight Recorder dumps in it
    else:
        remove_scratch(tmp)

    silent = started + result.seconds - last_output[0]
    status, summary, findings = judge(log, result.returncode, result.timed_out, result.seconds, silent)
    if log.collectives and not log.nccl_lines:
        findings.append(
            Finding(
                "info",
                "NCCL was not in use: collectives ran with no NCCL line in the output (a gloo or other "
                "process group), so NCCL_DEBUG says nothing here; the c10d and gloo lines were read instead",
            )
        )
    if dumps:
        findings.append(
            Finding(
                "info",
                f"Flight Recorder wrote {len(dumps)} dump(s) in {tmp}: "
                f"analyze with `torchfrtrace {tmp} --prefix {FR_PREFIX}`",
                "collective",
            )
        )
    if result.timed_out and status == "ok" and silent > max(10.0, 0.3 * result.seconds):
        # Past the first collective, a job that stops printing may be hung in a later one.
        findings.append(
            Finding(
                "info",
                f"no output for the last {silent:.0f} s of the run: if it should have logged, look at the live "
                f"ranks (debug-stuck diagnose --pid P)",
            )
        )
    for note in notes:
        findings.append(Finding("info", note))
    if result.leftovers:
        findings.append(Finding("warn", f"could not kill process(es) {result.leftovers} of the run"))
    data = {
        "source": source,
        "command": " ".join(argv)[:1000],
        "cwd": cwd,
        "env_added": {k: v for k, v in added.items()},
        "socket_ifname": {k: env[k] for k in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME") if env.get(k)},
        "stage": log.stage(result.returncode),
        "stages": list(STAGES),
        "exit_code": result.returncode,
        "timed_out": result.timed_out,
        "run_seconds": round(result.seconds, 2),
        "processes": len(result.pids),
        "pids": result.pids[:64],
        "output_bytes_dropped": result.dropped_bytes,
        "flight_recorder_dumps": dumps,
        "python": sys.executable,
    }
    data.update(log.to_dict())
    return ProbeResult(NAME, status, summary, data=data, findings=findings)
