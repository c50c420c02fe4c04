"""A problem found in the knowledge base, as `file:field: message` (`debug-stuck skills check`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Problem:
    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.field}: {self.message}"
