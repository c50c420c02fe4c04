"""Errors that end a command: each carries its exit code and a hint on what is valid."""

from __future__ import annotations

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NOT_INSPECTABLE = 3


class DebugStuckError(Exception):
    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = f"{self.message}; {self.hint}" if self.hint else self.message
        return " ".join(text.split())  # a single line, whatever the message held


class BadInput(DebugStuckError):
    """Bad usage or bad input: an unknown answer key, a malformed file, a wrong value."""

    exit_code = EXIT_USAGE


class KnowledgeError(DebugStuckError):
    """The knowledge base under skills/ is broken (a malformed playbook or tree)."""

    exit_code = EXIT_USAGE


class NotInspectable(DebugStuckError):
    """The target process is gone, or we may not look at it."""

    exit_code = EXIT_NOT_INSPECTABLE


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwound like Ctrl-C, so every `finally` runs and what we started ends."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
