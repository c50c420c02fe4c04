"""Step 6 of the session: the report saved (Markdown and JSON) and the fix commands copied."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

CLIPBOARD_SECONDS = 2.0

# Clipboard tools, tried in order; each only where its display server is (pbcopy: macOS).
CLIPBOARD_TOOLS: Tuple[Tuple[Sequence[str], Optional[str]], ...] = (
    (("wl-copy",), "WAYLAND_DISPLAY"),
    (("xclip", "-selection", "clipboard"), "DISPLAY"),
    (("pbcopy",), None),
)


@dataclass
class SavedReport:
    markdown: str
    json: str

    def one_line(self) -> str:
        return f"report saved: {self.markdown} and {self.json}"


def copy_to_clipboard(text: str, timeout: float = CLIPBOARD_SECONDS) -> Optional[str]:
    """Put text on the clipboard with the first tool that works; its name, or None."""
    for argv, display in CLIPBOARD_TOOLS:
        if shutil.which(argv[0]) is None or (display and not os.environ.get(display)):
            continue
        try:
            # Output to /dev/null: xclip and wl-copy leave a child serving the selection, and it
            # must not hold our pipes open.
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            continue
        try:
            proc.communicate(text.encode("utf-8"), timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
            continue
        if proc.returncode == 0:
            return argv[0]
    return None
