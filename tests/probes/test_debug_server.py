"""torch's debug server as a source of every rank's stacks and Flight Recorder entries.

A live 2-rank gloo job (tests/targets/fr_debug_server_job.py) runs
torch.distributed.debug.start_debug_server on a free port and hangs: rank 0 in all_reduce #2,
rank 1 elsewhere. The reader asks the server over HTTP (GET only) like `diagnose` would.
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("jinja2", reason="torch's debug server frontend needs jinja2")
pytest.importorskip("tabulate", reason="torch's debug server frontend imports tabulate")

from debug_stuck.core.flight_recorder import analyze  # noqa: E402
from debug_stuck.probes.collectors.debug_server import parse_address, read_debug_server  # noqa: E402
from debug_stuck.zoo import spawn  # noqa: E402

JOB = Path(__file__).resolve().parents[1] / "targets" / "fr_debug_server_job.py"


def hang_line() -> int:
    return next(n for n, t in enumerate(JOB.read_text().splitlines(), 1) if t.endswith("# site:debug_server:hang"))


def main_thread(threads: list) -> list:
    """The frames of the thread whose outermost frame is the module's top level."""
    found = [t["frames"] for t in threads if t["frames"] and t["frames"][-1]["function"] == "<module>"]
    assert len(found) == 1, threads
    return found[0]


@pytest.mark.timeout(180)
def test_every_rank_stacks_and_flight_recorder_through_the_debug_server(tmp_path, request):
    port = spawn.free_port()
    argv = [sys.executable, str(JOB), str(spawn.free_port()), str(port)]
    env = {"TORCH_FR_BUFFER_SIZE": "2000", "GLOO_SOCKET_IFNAME": "lo"}
    job = spawn.start("debug-server", tmp_path, argv=argv, env=env, on_spawn=lambda j: request.addfinalizer(j.stop))
    deadline = time.monotonic() + 90
    while not all((job.workdir / f"rank{r}.ready").exists() for r in (0, 1)):
        assert job.proc.poll() is None, job.log_text()[-3000:]
        assert time.monotonic() < deadline, job.log_text()[-3000:]
        time.sleep(0.05)
    # the frontend process may still be starting, and rank 0 entering its all_reduce: ask until
    # the server answers with both (bounded)
    while True:
        read = read_debug_server("127.0.0.1", port, seconds=20)
        in_it = read.stacks.get(0) and any(f["function"] == "all_reduce" for f in main_thread(read.stacks[0]))
        if (in_it and len(read.fr) == 2 and len(read.fr[0]["entries"]) == 2) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert sorted(read.stacks) == [0, 1], read.errors
    rank0 = main_thread(read.stacks[0])
    assert rank0[0]["function"] == "all_reduce"
    assert any(f["file"] == str(JOB) and f["line"] == hang_line() for f in rank0)
    assert any(f["function"] == "skip_the_all_reduce" for f in main_thread(read.stacks[1]))
    assert sorted(read.fr) == [0, 1] and sorted(read.addresses) == [0, 1]
    assert [e["profiling_name"] for e in read.fr[0]["entries"]] == ["gloo:all_reduce", "gloo:all_reduce"]
    result = analyze(read.fr)
    assert result.culprits == [1] and result.primary.kind == "missing" and result.primary.seq == 2
    assert not [e for e in read.errors if "nccl" not in e.lower()], read.errors
    assert job.proc.poll() is None


@pytest.mark.timeout(30)
def test_a_closed_port_gives_the_error_line_within_the_bound():
    port = spawn.free_port()  # nothing listens there now
    started = time.monotonic()
    read = read_debug_server("127.0.0.1", port, seconds=5)
    assert time.monotonic() - started < 6
    assert not read.stacks and not read.fr
    assert read.errors[0].startswith(f"could not ask the debug server at 127.0.0.1:{port}: ")


@pytest.mark.timeout(30)
def test_a_server_that_never_answers_is_given_up_at_the_bound():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)  # connections complete in the backlog; nobody ever reads or answers
        port = server.getsockname()[1]
        started = time.monotonic()
        read = read_debug_server("127.0.0.1", port, seconds=2)
        assert time.monotonic() - started < 4
    assert read.errors and read.errors[0].startswith(f"could not ask the debug server at 127.0.0.1:{port}: ")


def test_addresses_are_read_as_host_and_port():
    assert parse_address("node7:26000") == ("node7", 26000)
    assert parse_address("node7") == ("node7", 25999)
    assert parse_address(":26000") == ("127.0.0.1", 26000)
    assert parse_address("[::1]:26000") == ("::1", 26000)
    with pytest.raises(ValueError, match="give HOST:PORT"):
        parse_address("node7:http")
