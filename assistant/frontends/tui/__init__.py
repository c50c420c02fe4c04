"""The Textual front end of the interactive session (`debug-stuck` on a terminal).

Importing this package imports Textual; the session core (debug_stuck.frontends.session) never does.
"""

from __future__ import annotations

from debug_stuck.frontends.session.core import Session


def run_app(session: Session) -> int:
    """Run the app on this terminal until the user quits; the exit code."""
    from debug_stuck.frontends.tui.app import DebugStuckApp

    app = DebugStuckApp(session)
    code = app.run()
    return 0 if code is None else int(code)
