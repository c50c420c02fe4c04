"""The ``zoo`` pytest fixture: start zoo programs, and always stop them.

In a test module::

    from zoo.fixtures import zoo  # noqa: F401

    def test_something(zoo):
        job = zoo("future_result")          # options as for spawn.start (stdout="pipe", env=...)
        ...

Every job is registered with ``request.addfinalizer`` as soon as its process exists (before READY
is awaited), so even a failing or timed-out test leaves nothing running.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from debug_stuck.zoo import spawn


@pytest.fixture
def zoo(request, tmp_path):
    def start(name: str, tmp: Path | None = None, **options) -> spawn.ZooJob:
        return spawn.start(
            name,
            tmp or tmp_path,
            on_spawn=lambda job: request.addfinalizer(job.stop),
            **options,
        )

    return start


@pytest.fixture
def sibling_ranks(zoo, tmp_path):  # noqa: F811
    """Start `gloo_ranks.py <scenario>` as two ranks with no common launcher, as srun or pdsh start
    them: each under a shell of its own (as slurmstepd or sshd would be), in a session of its own,
    RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set by hand. Returns (rank 0 pid, rank 1 pid,
    READY info); the jobs are stopped by the zoo fixture."""
    import json
    import sys
    import time

    def start(scenario: str, timeout: float = 90.0):
        shared = tmp_path / "siblings"
        shared.mkdir(exist_ok=True)
        port = spawn.free_port()
        script = str(spawn.ZOO_DIR / "gloo_ranks.py")
        jobs = []
        for rank in (0, 1):
            env = {
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "GLOO_SOCKET_IFNAME": "lo",
                "ZOO_WORKDIR": str(shared),
            }
            # `; :` keeps the shell as the rank's parent (no exec): no Python process above the rank
            argv = ["sh", "-c", '"$@"; :', "sh", sys.executable, script, scenario]
            jobs.append(zoo(f"rank{rank}", argv=argv, env=env, wait_ready=False))
        ready = shared / "READY"
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if time.monotonic() > deadline or any(job.proc.poll() is not None for job in jobs):
                raise spawn.ZooStartError(f"sibling ranks did not reach their hang: {jobs[0].log_text()[-2000:]}")
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        for job, rank in zip(jobs, (0, 1)):
            assert job.children_of(job.proc.pid)[0].pid == info[f"rank{rank}_pid"]
        return info["rank0_pid"], info["rank1_pid"], info

    return start
