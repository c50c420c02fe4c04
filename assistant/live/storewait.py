"""A wait in the job's own c10d store for a key no process has set.

torch's TCPStore answers a get() or wait() only once every key asked for exists (torch 2.13.0
torch/csrc/distributed/c10d/TCPStore.cpp: TCPStore::get -> doGet -> doWait waits for the key first;
TCPStoreLibUvBackend.cpp parse_wait_command answers once store->waitKeys finds them all). A client
blocked reading its connection to a process of the job that serves the store, inside such a call
(its native frames, or a connection to MASTER_ADDR:MASTER_PORT), waits for a set that has not come.
The key asked for is read from the waiting line of the job's source; the keys the job's code sets
(`.set("...")`, `.add("...")`, literal first arguments) from the source files of its own frames, so
a key set under another spelling is named. Nothing is run, nothing is asked of the store.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
from typing import Dict, List, Optional, Tuple

from debug_stuck.live.loops import is_library, job_roots, own_frame_index
from debug_stuck.live.selflock import attribute_calls, frame_source, parse_source, source_of
from debug_stuck.live.waitwords import OP_WORDS, describe_peer, object_text

# the native frames of a TCPStore client waiting for its keys (symbols of libtorch_cpu.so; frames.yaml
# torch-native-tcpstore-wait)
STORE_WAIT = re.compile(r"c10d::TCPStore::(get|doGet|wait|doWait|multiGet)$")
SETTERS = ("set", "add", "compare_set", "multi_set")
GETTERS = ("get", "wait", "multi_get")


def store_wait(job, hop, wait: dict, thread, server: List[dict], via_master: bool) -> bool:
    """Mark hop (end `store-wait`, `key`, `set_key`, `set_at`) when it waits without answer on a
    connection to a process of the job that serves its c10d store: a connection to MASTER_ADDR:
    MASTER_PORT (`via_master`), or one its TCPStore client's native frames wait on. False otherwise."""
    if hop.facts.get("end") != "no-answer" or not server:
        return False
    in_store = thread is not None and any(f.native and STORE_WAIT.match(f.function or "") for f in thread.frames)
    if not (via_master or in_store):
        return False
    obj = wait.get("object") or {}
    hop.facts["end"] = "store-wait"
    where = "(MASTER_ADDR:MASTER_PORT)" if via_master else "(a TCPStore)"
    hop.detail = (
        f"is blocked in {OP_WORDS.get(hop.op, hop.op)} on {object_text(obj)}, this job's c10d store {where}, "
        f"served by {describe_peer(server)}, a process of this job: the store answers a get() or wait() "
        "once some process sets the key"
    )
    keys = _keys_waited(job, hop.pid, thread) if thread is not None else []
    if not keys:
        hop.detail += ", and none has"
        return True
    hop.facts["key"] = keys[0]
    hop.detail += f" {keys[0]!r}, and none has"
    near = _near_key(job, keys[0])
    if near is not None:
        key, at = near
        hop.facts.update(set_key=key, set_at=at)
        hop.detail += f"; the job's code sets {key!r} ({at}), not {keys[0]!r}"
    return True


def _keys_waited(job, pid: int, thread) -> List[str]:
    index = own_frame_index(thread.frames)
    if index is None:
        return []
    frame = thread.frames[index]
    for call, _ in attribute_calls(parse_source(frame_source(frame, pid)), GETTERS):
        if call.lineno <= frame.line <= (call.end_lineno or call.lineno):
            return _literal_keys(call)
    return []


def _near_key(job, key: str) -> Optional[Tuple[str, str]]:
    """(a key the job's code sets, where) when the job never sets `key` itself but sets one spelled
    almost alike; None when it sets `key`, or sets nothing alike."""
    found: Dict[str, str] = {}
    for path, pid in _own_files(job):
        for call, _ in attribute_calls(parse_source(source_of(path, pid)), SETTERS):
            for name in _literal_keys(call)[:1]:
                found.setdefault(name, f"{os.path.basename(path)}:{call.lineno}")
    if key in found or not found:
        return None
    close = difflib.get_close_matches(key, list(found), n=1, cutoff=0.8)
    return (close[0], found[close[0]]) if close else None


def _own_files(job) -> List[Tuple[str, int]]:
    """(path, pid) of every source file of the job's own code seen on a stack, once each."""
    seen: Dict[str, int] = {}
    for pid in job.procs:
        threads = job.threads(pid)
        roots = job_roots([t.frames for t in threads])
        for thread in threads:
            for frame in thread.frames:
                path = frame.path or frame.file
                if not frame.native and path and os.path.isabs(path) and not is_library(frame, roots):
                    seen.setdefault(path, pid)
    return list(seen.items())[:20]


def _literal_keys(call: ast.Call) -> List[str]:
    """The string keys a store call names literally: get("k"), set("k", v), wait(["k1", "k2"])."""
    if not call.args:
        return []
    first = call.args[0]
    items = first.elts if isinstance(first, (ast.List, ast.Tuple)) else [first]
    return [item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]
