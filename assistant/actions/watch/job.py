"""The watched job: launched by us (a session of its own, its output in a log we own) or attached to."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import psutil

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.errors import BadInput, NotInspectable
from debug_stuck.recovery.reading import READ_SECONDS
from debug_stuck.writer import open_private_append


@dataclass
class Job:
    pid: int
    command: List[str]
    cwd: str
    env: Optional[Dict[str, str]] = None  # the full environment to relaunch with
    proc: Optional[subprocess.Popen] = None  # None when attached
    log: Optional[str] = None  # the log we own (launched jobs)
    logs: List[str] = field(default_factory=list)  # every log followed for progress
    # attached: the job's own open logs, path as it names them -> /proc/P/fd/N, where they are read
    read_paths: Dict[str, str] = field(default_factory=dict)
    run: int = 1

    @property
    def launched(self) -> bool:
        return self.proc is not None

    def exit_code(self) -> Optional[int]:
        """The exit status once it ended by itself (None while it runs; attached: None when unknown)."""
        if self.proc is None:
            return None
        code = self.proc.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code

    def gone(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is not None
        try:
            return psutil.Process(self.pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True
        except psutil.Error:
            return False


def launch(command: List[str], cwd: str, log_path: Path, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    """Start the command in a session of its own, stdout and stderr appended to log_path."""
    full_env = dict(os.environ if env is None else env)
    # The job writes to a file now, not a terminal: without this Python buffers its prints in 8 KiB
    # blocks and the step counter would reach the log minutes late.
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The job's output may hold anything it prints (tokens included): a private file, never a link.
    with os.fdopen(open_private_append(str(log_path)), "ab") as log:
        try:
            return subprocess.Popen(
                command,
                cwd=cwd,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise BadInput(f"command not found: {command[0]}", "give the program to run after --") from None
        except PermissionError:
            raise BadInput(f"cannot run {command[0]}: permission denied", "is it executable?") from None


def attach(pid: int) -> Job:
    """A Job for a running process: its command, directory, environment and log files."""
    from debug_stuck.recovery.jobtree import refuse_unless_a_job

    refuse_unless_a_job(pid)  # not init, a daemon, a shell, a zombie, nor this debug-stuck
    try:
        proc = psutil.Process(pid)

        def read():
            with proc.oneshot():
                return proc.cmdline(), proc.cwd(), proc.environ(), proc.status()

        cmdline, cwd, env, status = call_with_timeout(read, READ_SECONDS, f"reading process {pid}")
    except psutil.NoSuchProcess:
        raise NotInspectable(f"process {pid} does not exist (it may have exited)", "check the PID with ps") from None
    except psutil.AccessDenied:
        raise NotInspectable(
            f"permission denied reading process {pid}", "run debug-stuck as the job's user or as root"
        ) from None
    except CallTimedOut as exc:
        raise NotInspectable(f"{exc}", "the process may be in uninterruptible sleep; try diagnose") from None
    if status == psutil.STATUS_ZOMBIE:
        raise NotInspectable(f"process {pid} has exited (zombie)", "nothing left to watch")
    from debug_stuck.probes.collectors.jobfiles import std_streams

    # read through the job's own descriptors: in its mount namespace the path may name another file
    streams = {}
    for entry in std_streams(pid):
        streams.setdefault(entry.path, entry.read_path)
    return Job(pid=pid, command=cmdline, cwd=cwd, env=env, logs=list(streams), read_paths=streams)
