"""A report on disk: Markdown for people and JSON for programs, side by side, through the one writer."""

from __future__ import annotations

import json
import os
from typing import Tuple

from debug_stuck.core.report import Report
from debug_stuck.render.markdown import render_markdown
from debug_stuck.writer import write_file


def report_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def write_report_files(report: Report, base: str) -> Tuple[str, str]:
    """Write BASE.md and BASE.json (each 0600, atomic); returns their paths. Raises OSError."""
    base = os.path.abspath(os.path.expanduser(base))
    report.redact()  # a file outlives the session: it holds no secret
    markdown = write_file(base + ".md", render_markdown(report))
    data = write_file(base + ".json", report_json(report))
    return markdown, data
