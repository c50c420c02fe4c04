"""End to end in a real terminal: the installed `debug-stuck` in tmux (send-keys, capture-pane)
against a real hung process, until the diagnosis is on screen.

tmux is a system package (apt-get install tmux, brew install tmux); without it this test skips.
The tmux server runs on a socket of its own, killed by name in a finalizer (the name is ours);
the zoo job is stopped by the `zoo` fixture.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from installed import installed_script
from zoo.fixtures import zoo  # noqa: F401

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)")

WIDTH, HEIGHT = 120, 40


def session_command() -> list:
    """Bare `debug-stuck` opens the session: the installed script, else the module."""
    exe = installed_script()
    return [exe] if exe else [sys.executable, "-m", "debug_stuck"]


class Tmux:
    def __init__(self, socket: str, name: str):
        self.socket = socket
        self.name = name

    def run(self, *args: str, check: bool = True) -> str:
        result = subprocess.run(
            [TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=20, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name, check=False)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.name, *keys)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(0.2)
        size = self.run("display", "-p", "-t", self.name, "#{window_width}x#{window_height}", check=False).strip()
        raise AssertionError(f"{pattern!r} not on screen after {timeout:.0f} s ({size}); the screen:\n{screen}")


@pytest.mark.timeout(240)
def test_debug_stuck_in_tmux_diagnoses_a_hung_process(zoo, tmp_path, request):  # noqa: F811
    job = zoo("future_result")
    tag = f"debug-stuck-e2e-{os.getpid()}"
    tmux = Tmux(socket=tag, name=tag)
    # The server and session are ours, on our own socket: ended by their name, never by a search.
    request.addfinalizer(lambda: tmux.run("kill-server", check=False))
    command = " ".join(session_command())
    # COLUMNS/LINES (pytest sets 80x24) would override the terminal's real size.
    shell = f"cd {tmp_path} && env -u COLUMNS -u LINES {command}; echo DEBUG-STUCK-EXIT=$?; sleep 60"
    # The server takes this process's environment (PATH, the virtualenv) when it starts.
    tmux.run("new-session", "-d", "-s", tag, "-x", str(WIDTH), "-y", str(HEIGHT), shell)

    tmux.wait_for(r"Step 1 of 6: pick the job")
    tmux.wait_for(r"training job\(s\) on this machine|No training job found")
    tmux.keys("a")
    tmux.wait_for(r"Attach to a process by PID")
    tmux.keys(str(job.proc.pid), "Enter")
    tmux.wait_for(r"Step 2 of 6: triage")
    tmux.wait_for(r"process(es)? read", timeout=60)  # the live evidence is in

    wanted = ("mid-run", "random")  # what the user knows; for the rest the highlighted answer will do
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        screen = tmux.screen()
        if "Step 5 of 6: diagnosis" in screen:
            break
        match = re.search(r"question (\d+) of", screen)
        if match is None:
            time.sleep(0.2)
            continue
        # The answers are numbered; the digit picks one (the first line of an option never wraps away).
        picks = [re.search(rf"(\d)\. {value}:", screen) for value in wanted]
        key = next((m.group(1) for m in picks if m), "Enter")
        tmux.keys(key)
        # wait for the next question (or the diagnosis) before answering again
        number = match.group(1)
        tmux.wait_for(rf"question (?!{number} of)\d+ of|Step 5 of 6", timeout=30)
    screen = tmux.wait_for(r"1\. thread-deadlock", timeout=90)
    assert "HUNG" in screen and "Most likely: Threads or processes" in screen

    tmux.keys("q")
    screen = tmux.wait_for(r"DEBUG-STUCK-EXIT=\d+", timeout=30)
    assert "DEBUG-STUCK-EXIT=0" in screen
    # quitting says so, and that nothing it started is left running
    assert "debug-stuck: session ended; nothing it started is still running" in screen
