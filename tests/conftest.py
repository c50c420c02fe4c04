import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def knowledge():
    from debug_stuck.core.kb import load_knowledge

    return load_knowledge()


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
