"""Watchers and the jobs they watch, as the watch tests run them: a watcher subprocess whose JSON
events are read as they arrive, and a job the test starts itself (for `watch --pid`). A helper
module (not a test module): the watch tests import it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from conftest import TARGETS, end_process_tree

__all__ = ["TARGETS", "WatchRun", "start_logged_job"]


def _watch_entry() -> list:
    """`python -m debug_stuck`, as a user would run it."""
    return [sys.executable, "-m", "debug_stuck"]


class WatchRun:
    """A watcher subprocess; its JSON events are parsed line by line as they arrive."""

    def __init__(self, args, cwd: Path, state: Path):
        env = dict(os.environ, DEBUG_STUCK_STATE_DIR=str(state))
        self.proc = subprocess.Popen(
            [*_watch_entry(), *map(str, args)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            # a shell running the tests in the background ignores SIGINT, and children inherit that
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.events: list = []
        self.stderr = ""
        self.job_pids: set = set()
        self.seen: set = set()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            event = json.loads(line)  # every stdout line is one JSON object
            if event["event"] in ("started", "restarted"):
                self.job_pids.add(event["pid"])
            self.events.append(event)

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr += line

    def remember_tree(self) -> None:
        try:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                self.seen.add(child.pid)
        except psutil.Error:
            pass

    def of(self, kind: str) -> list:
        return [e for e in self.events if e["event"] == kind]

    def wait_for(self, kind: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.remember_tree()
            found = self.of(kind)
            if found:
                return found[0]
            if self.proc.poll() is not None:
                time.sleep(0.2)  # let the reader catch up with the last lines
                found = self.of(kind)
                if found:
                    return found[0]
                break
            time.sleep(0.1)
        raise AssertionError(f"no {kind!r} event; events: {[e['event'] for e in self.events]}; stderr: {self.stderr}")

    def wait_until(self, condition, timeout: float) -> dict:
        """The first event for which condition(event) holds, waiting up to timeout seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.remember_tree()
            found = [e for e in list(self.events) if condition(e)]
            if found:
                return found[0]
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no such event; events: {self.events[-5:]}; stderr: {self.stderr}")

    def finish(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.remember_tree()
            time.sleep(0.1)
        code = self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        time.sleep(0.2)
        return code

    def kill(self) -> None:
        """The watcher's group, each job's own session, and any process seen in the tree, by PID."""
        self.remember_tree()
        for pgid in [self.proc.pid, *self.job_pids]:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in self.seen:
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass


def start_logged_job(tmp_path, request, argv) -> subprocess.Popen:
    """A job started by the test (not by watch), its output in tmp_path/job.log, killed in a finalizer."""
    log = open(tmp_path / "job.log", "ab")  # noqa: SIM115 - closed in the finalizer
    job = subprocess.Popen(
        [str(a) for a in argv],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        start_new_session=True,
    )

    def cleanup():
        end_process_tree(job)
        log.close()

    request.addfinalizer(cleanup)
    return job
