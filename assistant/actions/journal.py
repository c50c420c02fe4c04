"""The incident journal: every stall `watch` flags, in one SQLite file under the user's state directory.

`debug-stuck history` reads it back: the incidents, newest first, and the patterns that recur (the
same command stalling at the same step for the same cause is a deterministic hang, not bad luck).

Several watchers may write at once (one per job), so the database runs in WAL mode with a busy
timeout; every operation opens its own connection inside a bounded call, because a home directory
on a wedged network mount must cost a watcher one line of warning, never its life.
"""

from __future__ import annotations

import os
import random
import socket
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List, Optional

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.writer import open_private_append

JOURNAL_FILE = "journal.sqlite3"
STATE_DIR_ENV = "DEBUG_STUCK_STATE_DIR"
SQLITE_BUSY_SECONDS = 5.0  # how long one statement waits for another watcher's write lock
OPERATION_SECONDS = 10.0  # the whole operation, busy wait included
SCHEMA_VERSION = 2  # 2: ended, end_code (how the watched job ended after the incident)
PATTERN_SCAN = 2000  # patterns are looked for among this many of the newest incidents

_SCHEMA = """
CREATE TABLE IF NOT EXISTS incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    host TEXT,
    pid INTEGER,
    command TEXT,
    cwd TEXT,
    last_step INTEGER,
    seconds_stalled REAL,
    threshold REAL,
    cause TEXT,
    confidence REAL,
    pattern TEXT,
    phase TEXT,
    summary TEXT,
    report_markdown TEXT,
    report_json TEXT,
    action TEXT,
    outcome TEXT,
    watch_id TEXT,
    attempt INTEGER,
    ended TEXT,
    end_code INTEGER
);
CREATE INDEX IF NOT EXISTS incidents_time ON incidents(time);
"""
ADDED_COLUMNS = (("ended", "TEXT"), ("end_code", "INTEGER"))  # after schema version 1


class JournalError(Exception):
    """The journal could not be read or written (the message says why, in one line)."""


def state_dir() -> Path:
    """Where debug-stuck keeps its state: $DEBUG_STUCK_STATE_DIR, else the platform's user state dir."""
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    try:
        from platformdirs import user_state_dir
    except ImportError:
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        return Path(base) / "debug-stuck"
    return Path(user_state_dir("debug-stuck"))


def journal_path() -> Path:
    return state_dir() / JOURNAL_FILE


@dataclass
class Incident:
    time: float
    command: str
    pid: Optional[int] = None
    host: str = field(default_factory=socket.gethostname)
    cwd: Optional[str] = None
    last_step: Optional[int] = None
    seconds_stalled: Optional[float] = None
    threshold: Optional[float] = None
    cause: Optional[str] = None
    confidence: Optional[float] = None
    pattern: Optional[str] = None
    phase: Optional[str] = None
    summary: Optional[str] = None
    report_markdown: Optional[str] = None
    report_json: Optional[str] = None
    action: Optional[str] = None
    outcome: Optional[str] = None
    watch_id: Optional[str] = None
    attempt: Optional[int] = None
    ended: Optional[str] = None  # how the watched job ended later (a restarted job that finished says so)
    end_code: Optional[int] = None  # its exit code then
    id: Optional[int] = None

    def to_dict(self) -> dict:
        out = asdict(self)
        out["when"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time))
        return out


@dataclass
class RecurringPattern:
    """Incidents of one command that share something: the step they stalled at (``same-step``: a
    deterministic hang, pattern D) or the cause the report named (``same-cause``)."""

    kind: str  # same-step | same-cause
    command: str
    last_step: Optional[int]  # same-step: the step
    cause: Optional[str]  # same-cause: the cause
    count: int
    first: float
    last: float
    causes: List[Optional[str]] = field(default_factory=list)  # same-step: the causes named, newest first
    steps: List[Optional[int]] = field(default_factory=list)  # same-cause: the steps, newest first

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "command": self.command,
            "last_step": self.last_step,
            "cause": self.cause,
            "count": self.count,
            "first": self.first,
            "last": self.last,
            "causes": self.causes,
            "steps": self.steps,
            "recurring": self.count > 1,
        }


def group_patterns(incidents: List[Incident]) -> List[RecurringPattern]:
    """Group incidents by (command, step) and by (command, cause); the most frequent first."""
    groups: dict = {}
    for incident in sorted(incidents, key=lambda i: i.time, reverse=True):
        keys = []
        if incident.last_step is not None:
            keys.append(("same-step", incident.command, incident.last_step))
        if incident.cause:
            keys.append(("same-cause", incident.command, incident.cause))
        for key in keys:
            kind, command, value = key
            group = groups.get(key)
            if group is None:
                group = groups[key] = RecurringPattern(
                    kind,
                    command,
                    value if kind == "same-step" else None,
                    value if kind == "same-cause" else None,
                    0,
                    incident.time,
                    incident.time,
                )
            group.count += 1
            group.first = min(group.first, incident.time)
            group.last = max(group.last, incident.time)
            if kind == "same-step":
                group.causes.append(incident.cause)
            else:
                group.steps.append(incident.last_step)
    # same count: the same step first, it is the stronger hint (a deterministic hang)
    return sorted(groups.values(), key=lambda g: (-g.count, g.kind != "same-step", -g.last))


class Journal:
    def __init__(self, path: Optional[Path] = None):
        self.path = Path(path) if path is not None else journal_path()

    # -- plumbing ---------------------------------------------------------------------------------

    def _run(self, what: str, fn, create: bool = True):
        def operation():
            if create:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            elif not self.path.exists():
                return None
            if self.path.is_symlink():
                raise OSError(f"{self.path} is a symbolic link; refusing to write through it")
            if create and not self.path.exists():
                # commands and summaries are in it: readable by its owner only (SQLite gives its
                # -wal and -shm files the same mode)
                os.close(open_private_append(str(self.path)))
            deadline = time.monotonic() + SQLITE_BUSY_SECONDS
            while True:
                try:
                    return attempt()
                except sqlite3.OperationalError as exc:
                    # SQLite answers some lock conflicts (switching to WAL while a first watcher
                    # creates the file, a read lock upgraded to a write lock) with "locked" at
                    # once, without its busy handler: wait a little and try the whole step again.
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.02 + 0.08 * random.random())

        def attempt():
            conn = sqlite3.connect(str(self.path), timeout=SQLITE_BUSY_SECONDS)
            try:
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_SECONDS * 1000)}")
                if create:
                    self._ensure_schema(conn)
                result = fn(conn)
                conn.commit()
                return result
            finally:
                conn.close()

        try:
            return call_with_timeout(operation, OPERATION_SECONDS, f"journal {what}")
        except CallTimedOut as exc:
            raise JournalError(f"{exc} ({self.path}: is its file system hung?)") from None
        except (sqlite3.Error, OSError) as exc:
            raise JournalError(f"journal {what} failed ({self.path}): {exc}") from None

    @staticmethod
    def _ensure_schema(conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version >= SCHEMA_VERSION:
            return
        # WAL lets readers (history) and several writers (watchers) share the file without blocking.
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(_SCHEMA)
        have = {row[1] for row in conn.execute("PRAGMA table_info(incidents)")}
        for name, kind in ADDED_COLUMNS:  # a journal written by an earlier version
            if name not in have:
                try:
                    conn.execute(f"ALTER TABLE incidents ADD COLUMN {name} {kind}")
                except sqlite3.OperationalError as exc:
                    if "duplicate column" not in str(exc):  # another watcher added it meanwhile
                        raise
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # -- writes -----------------------------------------------------------------------------------

    def record(self, incident: Incident) -> int:
        """Insert an incident; returns its id (also set on the incident)."""
        for name in ("report_markdown", "report_json", "cwd"):
            value = getattr(incident, name)
            if value and not os.path.isabs(value):  # relative to where watch ran: unopenable from elsewhere
                setattr(incident, name, os.path.abspath(value))
        data = asdict(incident)
        data.pop("id")
        columns = ", ".join(data)
        marks = ", ".join("?" for _ in data)

        def insert(conn):
            cur = conn.execute(f"INSERT INTO incidents ({columns}) VALUES ({marks})", tuple(data.values()))
            return cur.lastrowid

        incident.id = self._run("write", insert)
        return incident.id

    def update(self, incident_id: int, **fields) -> None:
        """Set some fields of a recorded incident (the action taken, its outcome)."""
        allowed = set(Incident.__dataclass_fields__) - {"id"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown incident fields: {', '.join(sorted(unknown))}")
        if not fields:
            return
        for name in ("report_markdown", "report_json", "cwd"):
            if fields.get(name) and not os.path.isabs(fields[name]):
                fields[name] = os.path.abspath(fields[name])
        assignments = ", ".join(f"{name} = ?" for name in fields)
        self._run(
            "update",
            lambda conn: conn.execute(
                f"UPDATE incidents SET {assignments} WHERE id = ?", (*fields.values(), incident_id)
            ),
        )

    # -- reads ------------------------------------------------------------------------------------

    def incidents(self, limit: int = 20) -> List[Incident]:
        """The newest `limit` incidents, newest first ([] when nothing was ever recorded)."""

        def select(conn):
            if not _has_table(conn):
                return []
            rows = conn.execute("SELECT * FROM incidents ORDER BY time DESC, id DESC LIMIT ?", (limit,)).fetchall()
            return [Incident(**{k: row[k] for k in row.keys() if k in Incident.__dataclass_fields__}) for row in rows]

        return self._run("read", select, create=False) or []

    def patterns(self, limit: int = 20, scan: int = PATTERN_SCAN) -> List[RecurringPattern]:
        """The `limit` largest groups among the newest `scan` incidents (see group_patterns)."""
        return group_patterns(self.incidents(limit=scan))[:limit]

    def count(self) -> int:
        def select(conn):
            if not _has_table(conn):
                return 0
            return conn.execute("SELECT COUNT(*) FROM incidents").fetchone()[0]

        return self._run("read", select, create=False) or 0


def _has_table(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'incidents'").fetchone()
    return row is not None
