"""A server that handles one request at a time, whose handler waits for what another request would
bring: that request waits in the listen backlog for ever.

CPython 3.11 Lib/socketserver.py: BaseServer.serve_forever calls _handle_request_noblock, which calls
process_request, and TCPServer's process_request calls finish_request in the same thread ("Mix-in
class to handle each request in a new thread" is ThreadingMixIn; http.server.ThreadingHTTPServer
since 3.7). A long-poll handler (`/wait` until a version is published) on such a server blocks the
very `/publish` request it waits for. Read from the stacks, nothing is run.
"""

from __future__ import annotations

from debug_stuck.live.endless import SERVE_FOREVER_FILE
from debug_stuck.live.loops import own_frame_index
from debug_stuck.live.parties import python_frames


def handler_blocks_server(job, hop, thread) -> bool:
    """Mark hop (end `one-thread-server`) when its thread, reached from a connection that waits on its
    process, runs socketserver's serve_forever and, inside it and on the same thread, a request's
    handler that waits: the request that would end the wait is never accepted."""
    if thread is None or hop.facts.get("via") != "socket":
        return False
    names = {f.bare_name for f in python_frames(thread.frames) if SERVE_FOREVER_FILE.search(f.file or "")}
    if not {"serve_forever", "finish_request"} <= names:
        return False
    own = own_frame_index(thread.frames)
    where = thread.frames[own].text() if own is not None else hop.where
    hop.facts["end"] = "one-thread-server"
    hop.detail = (
        f"serves requests on one thread (socketserver without ThreadingMixIn), and that thread waits inside a "
        f"request's handler at {where}: a request that would end its wait waits in the listen backlog"
    )
    return True
