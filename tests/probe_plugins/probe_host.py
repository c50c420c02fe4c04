"""`debug-stuck` with the test probe registered: `python probe_host.py probe slow-user-code ...`.

The session runs probes as `debug-stuck probe NAME` in a child process; this host is that child
in the tests, with one probe added to the registry."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import slow_user_probe  # noqa: E402

from debug_stuck.probes.targeted.registry import REGISTRY  # noqa: E402

REGISTRY[slow_user_probe.NAME] = slow_user_probe.SPEC

from debug_stuck.frontends.cli import main  # noqa: E402

sys.exit(main())
