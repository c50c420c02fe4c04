"""What a diagnosis is asked to look at: answers, logs, live processes, probes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from debug_stuck.core.answers import Answer


@dataclass
class DiagnoseRequest:
    answers: Dict[str, Answer] = field(default_factory=dict)
    logs: List[str] = field(default_factory=list)
    log_bytes: Optional[int] = None
    pids: List[int] = field(default_factory=list)
    auto: bool = False
    window: float = 1.0
    samples: int = 2
    native: bool = True
    progress: Optional[Callable[[str], None]] = None
    probes: List[str] = field(default_factory=list)  # targeted probes to run as part of the diagnosis
    # probes that already ran (ProbeResult.to_dict()): weighed like those run here, not run again
    probe_results: List[dict] = field(default_factory=list)
    allow_exec: bool = False

    @property
    def live(self) -> bool:
        return bool(self.pids) or self.auto
