"""The values of the fix for a multiprocessing Pool whose workers die as they start: the log holds the
same child traceback again and again (core.logstacks.process_errors), from workers a Pool names
(ForkPoolWorker-N, SpawnPoolWorker-N), while the job waits in the pool. CPython 3.11
Lib/multiprocessing/pool.py: Pool._maintain_pool replaces each worker that exits, so a worker whose
initializer raises is started again for ever and map() never gets a result."""

from __future__ import annotations

import re
from typing import Dict

POOL_WORKER = re.compile(r"^(Fork|Spawn|Forkserver)PoolWorker-\d+$")
POOL_FILE = re.compile(r"multiprocessing/pool\.py$")
AT_LEAST = 3  # dead workers in the log's tail, one error at one place


def respawn_values(values: Dict[str, str], report) -> None:
    """`respawn_exception`, `respawn_at`, `respawn_count` when the log's tail holds at least AT_LEAST
    Pool workers that died of one exception at one place, and a process of the job waits in a Pool."""
    errors = [e for log in getattr(report, "logs", None) or [] for e in log.get("process_errors") or []]
    workers = [e for e in errors if POOL_WORKER.match(str(e.get("process") or ""))]
    if len(workers) < AT_LEAST or len({(e.get("exception"), e.get("at")) for e in workers}) != 1:
        return
    in_pool = any(
        POOL_FILE.search(str(frame.get("path") or frame.get("file") or ""))
        for proc in getattr(report, "processes", None) or []
        for thread in proc.get("threads") or []
        for frame in thread.get("frames") or []
    )
    if in_pool:
        values["respawn_exception"] = str(workers[0]["exception"])
        values["respawn_at"] = str(workers[0]["at"])
        values["respawn_count"] = str(len(workers))
