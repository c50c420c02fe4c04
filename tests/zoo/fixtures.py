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
