import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
TARGETS = TESTS / "targets"


def end_process_tree(proc: subprocess.Popen) -> None:
    """End a job started in a session of its own: its whole process group, and every descendant
    that left the group, each by its PID (never by name); then reap it."""
    try:
        descendants = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for child in descendants:
        try:
            child.kill()
        except psutil.Error:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture
def session_job(request):
    """start(argv, **popen_options) -> Popen: a job in a session of its own, ended with its whole
    tree when the test ends, however it ends (the one way tests start the jobs they hang)."""
    started = []

    def start(argv, **options):
        proc = subprocess.Popen([str(a) for a in argv], start_new_session=True, **options)
        started.append(proc)
        return proc

    def end():
        # the last started first: a debugger or peer started on a job lets it go before it is ended
        # (a process stopped under ptrace takes no SIGTERM until its tracer leaves)
        for proc in reversed(started):
            end_process_tree(proc)

    request.addfinalizer(end)
    return start


@pytest.fixture(scope="session")
def knowledge():
    from debug_stuck.kb import load_knowledge

    return load_knowledge()


def diagnosed(request, knowledge=None):
    """The pipeline's report without the resume plan and the advice: what most tests look at."""
    from debug_stuck.pipeline import diagnose

    request.resume = False
    request.advice = False
    return diagnose(request, knowledge)


def example_request(knowledge, name: str):
    """A request holding a bundled example's answers and logs, as `diagnose --example NAME`."""
    from debug_stuck.pipeline.options import answered_request

    return answered_request(knowledge, example=name)


def diagnose_with_options(knowledge, *argv):
    """The report `debug-stuck diagnose ARGV` makes, as a Report (the request built by the CLI's own code)."""
    from debug_stuck.frontends.commands.diagnose import request_from_args
    from debug_stuck.pipeline import diagnose

    return diagnose(request_from_args(parse_cli("diagnose", *argv), knowledge), knowledge)


def parse_cli(*argv):
    """The CLI's own parser applied to argv (what `debug-stuck ...` hands a command's run())."""
    from debug_stuck.frontends.cli import build_parser

    argv = [str(a) for a in argv]
    launch = []
    if "--" in argv:
        cut = argv.index("--")
        argv, launch = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    args.launch = launch
    return args


@pytest.fixture
def cli(capsys):
    """Run the CLI in-process: returns (exit code, stdout, stderr)."""
    from debug_stuck.frontends.cli import main

    def run(*args):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse's --help / --version / usage errors
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def cli_json(cli):
    def run(*args):
        code, out, err = cli("diagnose", "--format", "json", *args)
        assert code == 0, err
        return json.loads(out)

    return run


def run_subprocess(*args, timeout=60, cwd=None, env=None):
    """The CLI as a user runs it: a fresh interpreter, its own stdout/stderr."""
    return subprocess.run(
        [sys.executable, "-m", "debug_stuck", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def all_gone(pids, seconds: float = 5.0) -> list:
    """The PIDs still alive (zombies count as dead: init reaps the orphans a moment later)."""
    deadline = time.monotonic() + seconds
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        still = []
        for pid in alive:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    still.append(pid)
            except psutil.NoSuchProcess:
                pass
        alive = still
        if alive:
            time.sleep(0.1)
    return alive
