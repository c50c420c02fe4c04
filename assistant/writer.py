"""The one file writer: every report, journal export and installed file goes through `write_file`.

Reports hold command lines and environments and are often written as root, so a write must never
be redirected and never be read half-done:
- the data goes to a temp file with a random name created in the target's own folder with
  O_CREAT|O_EXCL and mode 0600 (no other user can read it, and nobody can plant a link there first);
- it is fsynced, then renamed over the target (a reader sees the old file or the new one, whole);
- a target that is a symbolic link is refused, never followed;
- the whole write is bounded in time: a report folder on a hung mount costs an error, not the tool.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from typing import Union

from debug_stuck.bounded import CallTimedOut, call_with_timeout

PRIVATE = 0o600
WRITE_SECONDS = 30.0


def write_file(path: str, data: Union[str, bytes], mode: int = PRIVATE, seconds: float = WRITE_SECONDS) -> str:
    """Write data to path atomically (see the module's docstring); returns the absolute path.

    Raises OSError (strerror says why) when the folder is not writable, the target is a symbolic
    link or not a regular file, or the write did not finish within `seconds`."""
    target = os.path.abspath(os.path.expanduser(str(path)))
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        return call_with_timeout(lambda: _write(target, payload, mode), seconds, f"writing {target}")
    except CallTimedOut as exc:
        raise OSError(errno.ETIMEDOUT, f"{exc} (is its file system hung?)", target) from None


def _write(target: str, payload: bytes, mode: int) -> str:
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "is a symbolic link; refusing to write through it", target)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "exists and is not a regular file", target)
    folder, name = os.path.split(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)  # 0600, O_EXCL
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        if mode != PRIVATE:
            os.chmod(tmp, mode)
        os.replace(tmp, target)  # rename(2) replaces the name; it never follows a link planted there
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_folder(folder)
    return target


def open_private_append(path: str) -> int:
    """A file descriptor appending to path (a log that grows while a job runs): created 0600 if
    new, never through a symbolic link. Raises OSError."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, PRIVATE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "is a symbolic link; refusing to write through it", path) from None
        raise


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
