"""The first fix of a live diagnosis is about the thing the wait ends at: the FIFO nobody writes,
the peer that never answers, the lock holder, the dead worker, the loop that never ends. The
cause's playbook fixes follow it as background.

The remedies are data (skills/data/remedies.yaml): the chain is read as a signature (one token per
hop: kind, how its wait ends, flags) and the first entry whose pattern matches is filled with the
values of this job named in VALUES. What the remedy reads of the job's own files (the line that
asks a question, the `with` statements of two deadlocked threads) is read bounded, never run.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from typing import Dict, List, Optional

from debug_stuck.advice.deathlog import death_values, logged_death
from debug_stuck.advice.facts import JobFacts, in_package, is_library_frame, own_code_roots
from debug_stuck.advice.fill import filled_value
from debug_stuck.advice.joinlock import held_across_wait_values, join_lock_values
from debug_stuck.advice.madeafter import made_after_wait
from debug_stuck.advice.modulequeue import module_queue
from debug_stuck.advice.otherthreads import other_threads
from debug_stuck.advice.p2ptags import tag_mismatch
from debug_stuck.advice.pausewait import pause_values
from debug_stuck.advice.pgroups import group_order
from debug_stuck.advice.pipeholder import background_holder, both_send, child_flushes, endless_values, filter_child
from debug_stuck.advice.respawn import respawn_values
from debug_stuck.advice.samecall import same_call
from debug_stuck.advice.selflock import self_lock_values
from debug_stuck.advice.stdin import stdin_redirect
from debug_stuck.advice.subgroup import conditional_new_group
from debug_stuck.advice.swallowed import skipped_step
from debug_stuck.advice.threadlog import dead_thread, thread_traceback
from debug_stuck.advice.threadstart import never_started
from debug_stuck.advice.uneven import uneven_inputs, uneven_words
from debug_stuck.advice.values import ASYNC_UNMET, OPTIONAL, VALUES
from debug_stuck.advice.worldcount import missing_members
from debug_stuck.core.libfacts import called_function, match_frame, unwrap_call
from debug_stuck.core.report import FixItem, safety_dict


def remedy_for(report, facts: JobFacts, knowledge) -> Optional[FixItem]:
    """The fix keyed on the end of the job's wait, or None when the report has no chain (a log
    alone) or its end is one no remedy is written for."""
    from debug_stuck.kb import load_table

    try:
        table = load_table("remedies.yaml")
    except Exception:  # a broken table leaves the playbooks' fixes, which the check command names
        return None
    finding = report.verdict.finding or {}
    recorded = _flight_recorder(table.get("flight_recorder") or {}, getattr(report, "flight_recorder", None))
    if recorded is not None:
        return recorded
    if finding.get("kind") == "mismatch" and finding.get("sides"):
        reader = _Reader(report, knowledge)
        subgroup = _subgroup_fix(table, report, reader, finding)
        if subgroup is not None:
            return subgroup
        tags = tag_mismatch(finding, reader)  # a send and a recv whose tags differ as the source writes them
        groups = group_order(finding, reader)  # one collective on each rank's own process group
        key = (
            "p2p_tags"
            if tags
            else "group_order"
            if groups
            else "p2p_mismatch"
            if finding.get("ops") == "p2p"
            else "mismatch"
        )
        return _mismatch(
            table.get(key) or {}, finding, uneven_inputs(report), skipped_step(finding, reader), tags, groups
        )
    chain = report.chain or []
    if not chain:
        return None
    reader = _Reader(report, knowledge)
    signature = ">".join(reader.token(hop) for hop in chain)
    values = _values(reader, chain, facts, table)
    thread_traceback(values, report)
    dead_thread(values, report, chain[-1], _source_line(reader.own_frame(chain[-1]) or {}, chain[-1].get("pid")))
    respawn_values(values, report)
    conditional_new_group(values, report, reader)
    logged_death(values, report, chain[-1])
    same_call(values, report, reader, chain[-1])
    missing_members(values, report, reader, chain[-1])
    module_queue(values, reader, chain[-1])
    _other_queue(values, chain[-1])
    never_started(values, reader, chain[-1])
    made_after_wait(values, reader, chain)
    for entry in table.get("remedies") or []:
        if not re.search(entry["when"], signature):
            continue
        if not all(values.get(name) for name in entry.get("needs") or ()):
            continue
        fix = _fill(entry, values)
        fix.basis = f"{entry['id']}: {signature}"
        fix.covers = tuple(entry.get("covers") or ())  # playbook fixes it says for this job
        return fix
    return None


def _subgroup_fix(table, report, reader, finding) -> Optional[FixItem]:
    """The ranks meet in different calls because a rank-conditional new_group gave a later group
    another name on some ranks: that call is the fix, not the order of the collectives."""
    values: Dict[str, str] = {}
    conditional_new_group(values, report, reader)
    entry = next((e for e in table.get("remedies") or [] if e.get("id") == "new-group-on-some-ranks"), None)
    if entry is None or not all(values.get(name) for name in entry.get("needs") or ()):
        return None
    fix = _fill(entry, values)
    fix.basis = f"{entry['id']}: {finding.get('kind')}"
    return fix


# -- reading the chain -----------------------------------------------------------------------------


class _Reader:
    def __init__(self, report, knowledge):
        self.processes = {p["pid"]: p for p in report.processes or []}
        self.logs = list(getattr(report, "logs", None) or [])
        self.frames_table = getattr(knowledge, "frames", None) or []
        self.own_roots = own_code_roots(report.processes)

    def thread(self, hop: dict) -> Optional[dict]:
        proc = self.processes.get(hop.get("pid"))
        if proc is None:
            return None
        tid = (hop.get("thread") or {}).get("tid") or hop.get("pid")
        threads = proc.get("threads") or []
        return next((t for t in threads if t.get("tid") == tid), threads[0] if threads else None)

    def python_frames(self, hop: dict) -> List[dict]:
        thread = self.thread(hop)
        return [f for f in (thread or {}).get("frames") or [] if not f.get("native")]

    def own_frame(self, hop: dict) -> Optional[dict]:
        """The innermost frame of the job's own code on the waiting thread."""
        return next((frame for frame in self.python_frames(hop) if self.is_own(frame)), None)

    def library_wait(self, hop: dict) -> Optional[dict]:
        """What the library frame the thread waits in means (frames.yaml), innermost first, up to the
        first frame of the job's own code: a library below it only called that code (a Pool worker
        running the job's task), it is not what the task waits in."""
        for frame in self.python_frames(hop):
            entry = match_frame(self.frames_table, frame.get("function") or "", frame.get("file"))
            if entry is not None and entry.get("wait") != "busy":
                return entry
            if entry is None and self.is_own(frame):
                return None
        return None

    def is_own(self, frame: dict) -> bool:
        path = frame.get("path") or frame.get("file") or ""
        return path.endswith(".py") and not is_library_frame(frame, self.own_roots) and not path.startswith("<")

    def wait(self, hop: dict) -> dict:
        proc = self.processes.get(hop.get("pid")) or {}
        tid = (hop.get("thread") or {}).get("tid") or hop.get("pid")
        return (proc.get("waits") or {}).get(str(tid)) or {}

    def token(self, hop: dict) -> str:
        waits = hop.get("waits_on") or {}
        kind = waits.get("kind") or "unknown"
        token = kind
        if kind == "process":
            token += ":" + str(waits.get("state") or (self.processes.get(hop.get("pid")) or {}).get("state") or "?")
            if waits.get("end"):
                token += ":" + str(waits["end"])  # process:S:signal-blocked
        elif waits.get("end"):
            token += ":" + str(waits["end"])
        elif kind == "tty" and waits.get("op"):
            token += ":" + str(waits["op"])
        if waits.get("peer") == "self":
            token += "+self"
        if waits.get("spin_loop"):
            token += "+spin"
        if waits.get("loop") == "own":
            token += "+own"
        for flag in ("gc", "master", "exit"):
            if waits.get(flag) == "yes":
                token += "+" + flag
        entry = self.library_wait(hop)
        if entry is not None:
            token += "+wait=" + str(entry.get("wait"))
        if kind in ("pipe", "fifo", "socket") and waits.get("op") in ("write", "send"):
            token += "+write"
        if waits.get("lockfile") == "yes":
            token += "+lockfile"
        if waits.get("stdin") in ("parent", "prompt") or (waits.get("fd") == "0" and waits.get("end") == "no-writer"):
            token += "+stdin"  # input() has no frame of its own; a data feed (zcat | python) is not a prompt
        if waits.get("prompt") == "yes":
            token += "+prompt"  # a line of the job's code that calls input() or getpass(): a question
        if waits.get("followed") == "yes":
            token += "+followed"  # its output is read line by line by a thread the job joins
        if waits.get("preexec") == "yes":
            token += "+preexec"  # a Popen preexec_fn, in the forked child before exec
        return token


# -- the values ------------------------------------------------------------------------------------


def _site_text(frame: Optional[dict]) -> Optional[str]:
    if frame is None:
        return None
    file = frame.get("file") or frame.get("path") or "?"
    line = frame.get("line")
    return f"{frame.get('function')} ({file}:{line})" if line else f"{frame.get('function')} ({file})"


def _values(reader: _Reader, chain: List[dict], facts: JobFacts, table: dict) -> Dict[str, str]:
    end, first = chain[-1], chain[0]
    prev = chain[-2] if len(chain) > 1 else None
    waits = end.get("waits_on") or {}
    values: Dict[str, str] = dict.fromkeys(OPTIONAL, "")
    values.update({k: v for k, v in facts.values.items() if v})
    values["pid"] = str(end.get("pid"))
    values["who"] = end.get("who") or f"pid {end.get('pid')}"
    # every stopped process of the job, the chain's end first: resuming one leaves the others stopped
    stopped = [str(pid) for pid, p in reader.processes.items() if p.get("state") in ("T",) and pid != end.get("pid")]
    values["stopped_pids"] = " ".join([values["pid"], *stopped])
    values["stopped_others"] = f" (and {', '.join(f'pid {pid}' for pid in stopped)}, stopped too)" if stopped else ""
    values["where"] = end.get("where") or ""
    own = reader.own_frame(end)
    site = _site_text(own)
    if site:
        values["site"] = site
        values["at_site"] = f" at {site}"
        values["at_site_short"] = f" at {site}"
    values["first_pid"] = str(first.get("pid"))
    values["first_who"] = first.get("who") or f"pid {first.get('pid')}"
    plural = re.search(r"\branks\b| and ", values["first_who"])
    values["first_waits"] = "wait" if plural else "waits"
    if first.get("pid") != end.get("pid"):
        values["first_waiter"] = f", and {values['first_who']} {values['first_waits']} for it"
    first_site = _site_text(reader.own_frame(first))
    if first_site:
        values["first_at_site"] = f" at {first_site}"
    if (end.get("waits_on") or {}).get("kind") == "cycle":  # the process that closes the cycle: whose code to change
        values["closer_who"] = end.get("who") or f"pid {end.get('pid')}"
        closer_site = _site_text(reader.own_frame(end))
        values["closer_at_site"] = f" at {closer_site}" if closer_site else ""
    if prev is not None:
        values["prev_pid"] = str(prev.get("pid"))
        values["prev_who"] = prev.get("who") or f"pid {prev.get('pid')}"
        values["prev_argv"] = _argv_literal((reader.processes.get(prev.get("pid")) or {}).get("cmdline"))
    obj = waits.get("object")
    if obj and str(obj).startswith("/"):
        values["object"] = str(obj)
        values["object_dir"] = os.path.dirname(str(obj)) or "/"
        values["object_name"] = os.path.basename(str(obj))
    elif obj and waits.get("kind") in ("socket", "fifo", "file", "dir", "device", "pool"):
        values["object"] = str(obj)
        if waits.get("end") == "no-datagram":
            values["udp_port"] = str(obj).rsplit(":", 1)[-1]
    _connection(values, reader, end)
    _pipe_peer(values, reader, end)
    background_holder(values, reader.processes, chain)
    filter_child(values, reader.processes, chain, reader.wait(first))
    own_source = lambda hop: _source(_frame_path(reader.own_frame(hop)), hop.get("pid"))  # noqa: E731
    child_flushes(values, reader.processes, chain, own_source)
    pause_values(values, end, own_source, _frame_path(reader.own_frame(end)) or "")
    both_send(values, chain, lambda hop: _source_line(reader.own_frame(hop) or {}, hop.get("pid")))
    _lock_holder(values, reader, chain)
    _lock_pair(values, reader, chain)
    _stale_dataset(values, reader, end, facts)
    _lock_file(values, reader, end)
    death_values(values, reader.processes, end, table, reader.logs)
    _kernel(values, reader, end)
    # a prompt that closes a cycle (a child in pdb, its parent waiting for it) is the hop before the cycle
    _prompt(values, reader, prev if prev is not None and waits.get("kind") == "cycle" else end)
    if waits.get("forked_by"):
        values["fork_parent"] = str(waits["forked_by"])
    endless_values(values, reader.processes.get(end.get("pid")) or {}, waits)
    # a c10d store's key waited for, and one the job sets spelled alike (live.storewait)
    values.update({f"store_{k}": str(waits[k]) for k in ("key", "set_key", "set_at") if waits.get(k)})
    # an asyncio Event or Queue the job's code awaits and never completes (live.asyncwaits)
    values.update({k: str(waits[k]) for k in ASYNC_UNMET + ("sleep_left",) if waits.get(k)})
    # a parent at a multiprocessing primitive whose child spins on a flag (live.spinparty): the hop before
    spin = next((h.get("waits_on") or {} for h in chain if (h.get("waits_on") or {}).get("spin_loop")), None)
    if spin is not None:
        values.update(spin_pid=str(spin.get("object")), spin_loop=str(spin["spin_loop"]), spin_at=str(spin["spin_at"]))
    _sync(values, end, reader)
    _lock_cycle(values, end)
    join_lock_values(values, end, _source)
    held_across_wait_values(values, end, prev, chain)
    _self_lock(values, reader, end)
    _waited_thread(values, end)
    other_threads(values, reader, end)
    first_detail = (first.get("waits_on") or {}).get("detail") or ""
    found = re.search(r"waits in (\S+) for", first_detail)
    values["collective"] = found.group(1) if found else "collective"
    values["end_detail"] = (end.get("waits_on") or {}).get("detail") or "does not reach it"
    inside = (end.get("waits_on") or {}).get("detail") or ""
    found = re.search(r", inside (\w+)", inside)
    values["inside_text"] = f", inside {found.group(1)}" if found else ""
    found = re.search(r"is blocked in \S+ \(([^)]+)\), through ctypes", inside)
    if found and waits.get("gil") == "held":
        values["gil_lib"] = found.group(1)  # live.gil.native_call
    return values


def _connection(values: Dict[str, str], reader: _Reader, end: dict) -> None:
    waits = end.get("waits_on") or {}
    if waits.get("kind") not in ("socket",):
        return
    remote = str(waits.get("object") or "")
    if not remote:
        return
    values["remote"] = remote
    host, _, port = remote.rpartition(":")
    if host and port.isdigit():
        values["remote_host"], values["remote_port"] = host.strip("[]"), port
    raw = reader.wait(end)
    peer = ((raw.get("object") or {}).get("peer") or [None])[0]
    for watched in raw.get("watched") or []:  # an event loop's connections (its epoll's descriptors)
        obj = watched.get("object") or {}
        if peer is None and obj.get("remote") == remote and obj.get("peer"):
            peer = obj["peer"][0]
    stalled = waits.get("body") == "stalled"  # it answered, and its body stopped part-way
    values["remote_silence"] = "stopped sending part-way" if stalled else "never answers"
    if isinstance(peer, dict) and peer.get("pid"):
        values["peer_pid"] = str(peer["pid"])
        if peer["pid"] not in reader.processes and "python" in str(peer.get("name") or "").lower():
            values["peer_python"] = "yes"  # outside the job: debug-stuck can read it beside the job
        values["peer_text"] = f"the process there (pid {peer['pid']}, {peer.get('name') or '?'}) " + (
            "sent part of its answer and stopped sending." if stalled else "never replies."
        )
    elif stalled:
        values["peer_text"] = "the service there sent part of its answer (the body) and stopped sending."
    elif waits.get("end") == "never-accepted":
        values["peer_text"] = "the listener there never accepted it: its program is stuck or too busy to serve."
    else:
        values["peer_text"] = "the service there never replies."
    if waits.get("event_loop") == "asyncio":
        values["at_call"] = " it awaits"
        values["timeout_snippet"] = ASYNCIO_TIMEOUT
        return
    call = _network_call(reader, end)
    if call is not None:
        name, site = call
        values["at_call"] = f" {name}()"
        values["at_call_sentence"] = f" ({name} at {site})"
        frames = reader.python_frames(end)
        if _in_hub_client(frames):
            values["hub_client"] = "yes"  # its timeouts are its own settings (remedies.yaml)
        elif any(in_package(str(f.get("path") or f.get("file") or ""), "requests") for f in frames):
            values["timeout_snippet"] = _timeout_snippet("get", streamed=stalled or name == "iter_content")
        else:
            values["timeout_snippet"] = _timeout_snippet(name)


STATE_WORDS = {"T": "stopped", "t": "stopped by a debugger", "D": "stuck in the kernel", "R": "running", "S": "asleep"}
STREAMS = {"0": "stdin", "1": "stdout", "2": "stderr"}


def _pipe_peer(values: Dict[str, str], reader: _Reader, end: dict) -> None:
    """The process at the other end of the pipe the chain ends on, when it is not part of the job."""
    waits = end.get("waits_on") or {}
    if waits.get("kind") not in ("pipe", "fifo"):
        return
    raw = reader.wait(end)
    writing = raw.get("op") == "write" or waits.get("op") == "write"
    wanted = ("r", "rw") if writing else ("w", "rw")
    peer = next((p for p in raw.get("peers") or [] if p.get("mode") in wanted and p.get("pid") != end.get("pid")), None)
    if peer is None:
        return
    state = str(peer.get("state") or "?")
    values["peer_pid"] = str(peer["pid"])
    values["peer_name"] = str(peer.get("name") or "?")
    values["peer_state"] = STATE_WORDS.get(state, state)
    if state in ("T", "t"):
        values["peer_stopped"] = "yes"
    values["peer_doing"] = (
        ("is stopped" if state in ("T", "t") else "never reads it")
        if writing
        else ("is stopped" if state in ("T", "t") else "never writes to it")
    )
    values["stream"] = STREAMS.get(str(waits.get("fd")), "pipe") if waits.get("kind") == "pipe" else "FIFO"
    values["pipe_op"] = "writing to" if writing else "reading"


NETWORK_CALLS = (
    ("urlopen", "urllib"),
    ("request", "requests"),
    ("get", "requests"),
    ("post", "requests"),
    ("create_connection", "socket"),
    ("recv", "socket"),
    ("connect", "socket"),
)


def _network_call(reader: _Reader, end: dict):
    """The library call the job's own code made (urlopen, requests.get...): the frame just inside
    the job's own frame."""
    frames = reader.python_frames(end)
    for i, frame in enumerate(frames):
        path = frame.get("path") or frame.get("file") or ""
        if path.endswith(".py") and not is_library_frame(frame, reader.own_roots):
            if i == 0:
                return None
            callee = unwrap_call([_bare(f) for f in frames], i - 1)  # past a decorator's wrapper
            return called_function(frames[callee].get("function") or ""), _site_text(frame)
    return None


def _in_hub_client(frames: List[dict]) -> bool:
    return any(in_package(str(f.get("path") or f.get("file") or ""), "huggingface_hub") for f in frames)


def _bare(frame: dict) -> str:
    return (frame.get("function") or "").rsplit(".", 1)[-1]


# asyncio streams use non-blocking sockets: socket timeouts do not bound an await (Python docs,
# asyncio.timeout (3.11+) and asyncio.wait_for; aiohttp's ClientTimeout(total, sock_read))
ASYNCIO_TIMEOUT = (
    "import asyncio\n\n\n"
    "async def fetch(reader: asyncio.StreamReader) -> bytes:  # your coroutine that awaits the network\n"
    "    async with asyncio.timeout(60):  # Python 3.11+; before: await asyncio.wait_for(..., timeout=60)\n"
    "        return await reader.read(65536)  # raises TimeoutError after 60 s without an answer\n\n\n"
    "# aiohttp: aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300, sock_read=60))\n"
    "# httpx: httpx.AsyncClient(timeout=httpx.Timeout(60.0))\n"
)


def _timeout_snippet(name: str, streamed: bool = False) -> str:
    if name == "urlopen":
        return (
            "import urllib.request\n\n"
            'url = "https://example.com/endpoint"  # the address your code opens\n'
            "with urllib.request.urlopen(url, timeout=60) as response:  # raises TimeoutError after 60 s\n"
            "    body = response.read()\n"
        )
    if name in ("request", "get", "post", "send") and streamed:
        return (
            "import requests\n\n"
            'url = "https://example.com/file"  # the address your code downloads\n'
            "# the read timeout bounds each wait for the next bytes of the body, not the whole download\n"
            "response = requests.get(url, stream=True, timeout=(10, 60))  # (connect, read) seconds\n"
        )
    if name in ("request", "get", "post", "send"):
        return (
            "import requests\n\n"
            'url = "https://example.com/endpoint"  # the address your code calls\n'
            "response = requests.get(url, timeout=(10, 60))  # (connect, read) seconds\n"
        )
    return "import socket\n\nsocket.setdefaulttimeout(60)  # every socket made after this line times out after 60 s\n"


PERSISTENT_WORKERS = re.compile(r"persistent_workers\s*=\s*True")


def _stale_dataset(values: Dict[str, str], reader: _Reader, end: dict, facts: JobFacts) -> None:
    """A DataLoader worker that waits inside its fetcher's fetch, in the dataset's own code, in a job
    whose source makes its workers persistent: `fetching_site` and `persistent_workers`."""
    from debug_stuck.live.parties import is_fetch

    if not any(is_fetch(f.get("function") or "", f.get("file")) for f in reader.python_frames(end)):
        return
    site = _site_text(reader.own_frame(end))
    if not site:
        return
    values["fetching_site"] = site
    from debug_stuck.advice.edits import read_source

    for path in facts.source_files[:8]:
        text = read_source(path)
        if text and PERSISTENT_WORKERS.search(text):
            values["persistent_workers"] = os.path.basename(path)
            return


def _lock_pair(values: Dict[str, str], reader: _Reader, chain: List[dict]) -> None:
    """Two processes that each hold the file lock the other waits for (the chain's last two hops wait
    for locks, held by each other, and close the cycle): each one's pid, the lock it waits for and
    where its own code takes it."""
    if len(chain) < 3 or (chain[-1].get("waits_on") or {}).get("kind") != "cycle":
        return
    a, b = chain[-3], chain[-2]
    if any(
        (h.get("waits_on") or {}).get("kind") != "lock" or not (h.get("waits_on") or {}).get("object") for h in (a, b)
    ):
        return
    for key, hop in (("pair_a", a), ("pair_b", b)):
        values[f"{key}_pid"] = str(hop.get("pid"))
        values[f"{key}_wants"] = str(hop["waits_on"]["object"])
        site = _site_text(reader.own_frame(hop))
        values[f"{key}_at"] = f" at {site}" if site else ""


def _lock_holder(values: Dict[str, str], reader: _Reader, chain: List[dict]) -> None:
    lock = next((h for h in chain if (h.get("waits_on") or {}).get("kind") == "lock"), None)
    if lock is None:
        return
    waits = lock.get("waits_on") or {}
    if waits.get("object"):
        values["lock_path"] = str(waits["object"])
    for key in ("holder_thread", "holder_at"):  # its own process holds it (live.selflock.own_lock_holder)
        if waits.get(key):
            values[key] = str(waits[key])
        files = [str(f.get("path") or f.get("file") or "") for f in reader.python_frames(lock)]
        if any(in_package(file, "filelock") for file in files):
            values["filelock_lock"] = str(waits["object"])  # filelock 4.3.1: FileLock(path, timeout=...)
        else:
            values["fcntl_lock"] = "yes"
    holders = reader.wait(lock).get("lock_holders") or []
    if not holders:
        return
    holder = holders[0]
    values["holder_pid"] = str(holder)
    proc = reader.processes.get(holder) or {}
    outside = ((reader.wait(lock).get("lock_file") or {}).get("holder_cmdlines") or {}).get(holder)
    command = " ".join(str(proc.get("cmdline") or proc.get("name") or outside or "?").split())
    values["holder_cmd"] = command if len(command) <= 80 else command[:77] + "..."
    after = chain[chain.index(lock) + 1] if chain.index(lock) + 1 < len(chain) else None
    if after is not None and after.get("pid") == holder:
        values["holder_doing"] = (after.get("waits_on") or {}).get("detail") or "does not release it"
        if holder == chain[0].get("pid") and (chain[0].get("waits_on") or {}).get("kind") == "rank":
            values["holder_in_collective"] = "yes"  # it holds the lock inside the collective it waits in
    else:
        values["holder_doing"] = "does not release it"


def _lock_file(values: Dict[str, str], reader: _Reader, end: dict) -> None:
    found = reader.wait(end).get("lock_file")
    if not found or not found.get("path"):
        return
    values["lock_file"] = found["path"]
    frames = (reader.thread(end) or {}).get("frames") or []
    if any(
        (match_frame(reader.frames_table, f.get("function") or "", None) or {}).get("library") == "sqlite"
        for f in frames
        if f.get("native")
    ):
        values["sqlite_db"] = found["path"]  # SQLite's busy handler polls the database file's lock
    entry = reader.library_wait(end)
    values["lock_library"] = f", a lock file of {entry['library']}" if entry and entry.get("library") else ""
    holders = found.get("holders") or []
    if holders:
        values["lock_holders"] = f"pid {', '.join(map(str, holders))} has it open, so it may not be stale."
    elif found.get("recorded_pid") and not found.get("recorded_alive"):
        values["lock_holders"] = (
            f"It names pid {found['recorded_pid']} as its holder, and no such process runs here; "
            "no process has the file open."
        )
    else:
        values["lock_holders"] = "No process on this machine has the file open."


def _kernel(values: Dict[str, str], reader: _Reader, end: dict) -> None:
    proc = reader.processes.get(end.get("pid")) or {}
    values["in_wchan"] = f" ({proc['wchan']})" if proc.get("wchan") else ""
    waits = end.get("waits_on") or {}
    detail = waits.get("detail") or ""
    found = re.search(r" on (\S+) \((network|local): ([^)]*)\)", detail)
    values["on_mount"] = f", a {found.group(2)} {found.group(1)} mount at {found.group(3)}" if found else ""


def _prompt(values: Dict[str, str], reader: _Reader, end: dict) -> None:
    entry = reader.library_wait(end)
    waits = end.get("waits_on") or {}
    if not (waits.get("kind") == "tty" or waits.get("stdin") or (entry and entry.get("wait") == "input")):
        return
    own = reader.own_frame(end)
    if entry is not None and "debugger" in (entry.get("facts") or ()):
        # pdb shows the next line to run, not a question: the breakpoint() or set_trace() is just before it
        values["debugger_site"] = _site_text(own) or values.get("where") or "?"
        values["debugger_who"] = end.get("who") or f"pid {end.get('pid')}"
        return
    question = _question_at(own, end.get("pid")) if own else None
    values["prompt_text"] = f": {question!r}" if question else ""
    values["prompt_short"] = f" {question.strip()[:60]!r}" if question else ""
    if entry is not None and entry.get("released_by"):
        values["prompt_release"] = f"It asks for {entry.get('object')}; {entry['released_by']}."
    else:
        values["prompt_release"] = ""
    stdin_redirect(values, reader.wait(end).get("peers") or [], end, set(reader.processes))


def _question_at(frame: dict, pid) -> Optional[str]:
    """The text the job's own line passes to input() (or the line itself), read from its source."""
    line = _source_line(frame, pid)
    if not line:
        return None
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return line.strip()[:200]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
            "input",
            "getpass",
            "prompt",
        ):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                return node.args[0].value
    return line.strip()[:200]


def _source_line(frame: dict, pid) -> Optional[str]:
    text = _source(frame.get("path") or frame.get("file"), pid)
    line = frame.get("line")
    if not text or not isinstance(line, int):
        return None
    lines = text.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else None


def _frame_path(frame: Optional[dict]) -> Optional[str]:
    return (frame or {}).get("path") or (frame or {}).get("file")


def _source(path: Optional[str], pid) -> Optional[str]:
    from debug_stuck.live.selflock import source_of

    return source_of(path, pid)


SYNC_FEEDS = {
    "an item from a queue": "put items in the queue",
    "an Event nobody sets": "set the event",
    "a future's result": "finish the task",
    "a condition to be notified": "notify the condition",
    "a threading barrier": "reach the barrier",
    "room in a full queue": "take items from the queue",
    "data on a socket whose other end this process holds": "send on the socket",
    "room on a socket whose other end this process holds": "read from the socket",
    "a write to its eventfd": "write to the eventfd",
}


def _sync(values: Dict[str, str], end: dict, reader: _Reader) -> None:
    detail = (end.get("waits_on") or {}).get("detail") or ""
    found = re.match(r"waits for (.+?)(?: at (.+?\)))?(?:,|$)", detail)
    if not found:
        return
    what = found.group(1)
    values["sync_what"] = what
    values["feed_what"] = SYNC_FEEDS.get(what, "provide it")
    if what.startswith("data on a socket"):
        values["waits_on_own_socket"] = "yes"
    elif what.startswith(("room in a full queue", "room on a socket")):
        values["waits_to_put"] = "yes"
    else:
        values["waits_to_take"] = "yes"
    if what in ("a condition to be notified", "an Event nobody sets"):
        values["signal_wait"] = "yes"  # a notify or set() made before the wait began is lost for it
    if what != "a condition to be notified":
        values["not_notify_wait"] = "yes"
    if what == "a threading barrier":
        values["thread_barrier"] = "yes"  # a party that died, or one that was never started
    if found.group(2) and "at_site" not in values:
        values["at_site"] = f" at {found.group(2)}"
    if found.group(2):
        values["at_site_short"] = f" at {found.group(2)}"


def _waited_thread(values: Dict[str, str], end: dict) -> None:
    """The thread the end of the wait waits for, when the chain names it (a thread idle at exit)."""
    threads = (end.get("waits_on") or {}).get("threads") or []
    if len(threads) == 1 and (end.get("waits_on") or {}).get("kind") == "thread":
        values["thread_name"] = str(threads[0].get("name") or f"tid {threads[0].get('tid')}")
        if threads[0].get("where"):
            values["thread_site"] = str(threads[0]["where"])


# -- a lock-order deadlock: both sites, and the order ------------------------------------------------


def _lock_cycle(values: Dict[str, str], end: dict) -> None:
    waits = end.get("waits_on") or {}
    threads = waits.get("threads") or []
    if waits.get("kind") != "lock-cycle" or len(threads) < 2:
        return
    sides = []
    for party in threads[:2]:
        held, wanted = _locks_at(party, end.get("pid"))
        sides.append((party, held, wanted))
    described = []
    for party, held, wanted in sides:
        text = f"thread {party.get('name')!r} at {party.get('where') or party.get('function')}"
        if held and wanted:
            text += f" holds {_code(held[-1])} and waits for {_code(wanted)}"
        described.append(text)
    values["cycle"] = "; ".join(described) + "."
    names = [party.get("function") for party, _, _ in sides if party.get("function")]
    values["in_functions"] = f" in {' and '.join(dict.fromkeys(names))}" if names else ""
    a, b = sides[0], sides[1]
    if a[1] and a[2] and b[1] and b[2]:
        first, second = a[1][-1], a[2]
        values["locks"] = f"{_code(first)} and {_code(second)}"
        party = b[0]
        values["order_edit"] = (
            f"{party.get('function')} ({os.path.basename(str(party.get('file')))}:{party.get('line')}) takes "
            f"{_code(b[1][-1])} first; take {_code(first)} first there too, as {a[0].get('function')} does."
        )
        values["order_snippet"] = (
            f"# {party.get('function')} ({os.path.basename(str(party.get('file')))}): the same order as "
            f"{a[0].get('function')}: {first} first, then {second}\n"
            f"with {first}:\n"
            f"    with {second}:\n"
            f"        ...  # the body of {party.get('function')}\n"
        )
        values["lock_timeout_snippet"] = (
            f"# or fail loudly instead of hanging, in both functions\n"
            f"if not {second}.acquire(timeout=60):\n"
            f'    raise RuntimeError("{second} not acquired in 60 s: lock-order deadlock?")\n'
            f"try:\n"
            f"    ...  # the code that needs both locks\n"
            f"finally:\n"
            f"    {second}.release()\n"
        )
    else:
        values["locks"] = "the locks"
        values["order_edit"] = ""


def _other_queue(values: Dict[str, str], end: dict) -> None:
    """The thread that waits to put into another queue than the one the chain's end reads."""
    waits_on = end.get("waits_on") or {}
    putter = (waits_on.get("threads") or [{}])[0]
    if waits_on.get("end") == "other-queue" and putter.get("name"):
        values["putter_name"], values["putter_at"] = putter["name"], str(putter.get("where") or "its put()")


def _self_lock(values: Dict[str, str], reader: _Reader, end: dict) -> None:
    """A thread that waits for a lock its own outer frame holds (advice.selflock)."""
    waits_on = end.get("waits_on") or {}
    file_lock = waits_on.get("kind") == "lock" and waits_on.get("end") == "self-held"  # a second flock
    if waits_on.get("kind") != "futex" and not file_lock:
        return
    own = [
        f
        for f in reader.python_frames(end)
        if str(f.get("path") or f.get("file") or "").endswith(".py") and not is_library_frame(f, reader.own_roots)
    ]
    self_lock_values(values, end, own, _frame_text, _source_line, through_manager=file_lock)


def _argv_literal(cmdline) -> str:
    """A process's command line (the report's, shell-quoted and redacted) as a Python list literal."""
    try:
        argv = shlex.split(cmdline) if isinstance(cmdline, str) else list(cmdline or [])
    except ValueError:
        argv = []
    return repr(argv) if argv else '["your-command"]'


def _party_of(frame: dict) -> dict:
    return {"file": frame.get("path") or frame.get("file"), "line": frame.get("line")}


def _locks_at(party: dict, pid):
    from debug_stuck.live.selflock import locks_at

    return locks_at(_source(party.get("file"), pid), party.get("line"))


def _frame_text(frame: dict) -> str:
    return f"{_bare(frame)} ({os.path.basename(str(frame.get('path') or frame.get('file')))}:{frame.get('line')})"


def _code(text: str) -> str:
    return f"`{text}`"


# -- a collective mismatch ---------------------------------------------------------------------------


def _mismatch(
    entry: dict, finding: dict, uneven: str = "", skipped: str = "", tags: str = "", groups: str = ""
) -> Optional[FixItem]:
    if not entry:
        return None
    sides = []
    for side in finding.get("sides") or []:
        text = f"{side.get('who')} in {side.get('collective')}"
        if side.get("site"):
            text += f", called at {side['site']}"
        sides.append(text)
    values = {"sides": "; ".join(sides), "odd": finding.get("odd") or ""}
    values["uneven"] = uneven_words(finding, uneven)
    values["skipped"] = skipped  # empty: no step is skipped on one rank, and the snippet needs it
    values["tags"] = tags
    values["groups"] = groups
    fix = _fill(dict(entry, steps=entry.get("steps") or []), values)
    fix.basis = f"{entry.get('id')}: mismatch"
    fix.covers = tuple(entry.get("covers") or ())
    return fix


# -- a Flight Recorder finding -----------------------------------------------------------------------

FR_KEYS = {"behind": "behind", "never-joined": "never-joined", "not-completed": "behind"}


def _site(site: Optional[dict]) -> Optional[str]:
    if not site or not site.get("file"):
        return None
    return f"{os.path.basename(site['file'])}:{site.get('line')} ({site.get('function') or '?'})"


def _flight_recorder(entries: dict, fr: Optional[dict]) -> Optional[FixItem]:
    if not entries or not fr or not fr.get("culprits") or not fr.get("problems"):
        return None
    state = fr.get("culprit_state") or ""
    entry = entries.get(FR_KEYS.get(state, "mismatch" if state.startswith("different") else ""))
    if not entry:
        return None
    problem = fr["problems"][0]
    values = {
        "culprits": ", ".join(map(str, fr["culprits"])),
        "collective": str(fr.get("collective") or "the collective"),
        "seq": str(fr.get("seq") if fr.get("seq") is not None else "?"),
        "pg": f"{fr.get('pg')} ({fr.get('pg_desc')})" if fr.get("pg_desc") else str(fr.get("pg")),
        "line": str(problem.get("line") or (fr.get("findings") or [""])[0]),
        "waiting_site": _site(fr.get("waiting_call_site")) or "their call site",
        "culprit_site": _site(fr.get("call_site")) or "its last collective",
    }
    waiting, culprit = fr.get("waiting_call_site") or {}, fr.get("call_site") or {}
    if waiting.get("file") and waiting.get("file") == culprit.get("file"):
        lines = sorted(x for x in (waiting.get("line"), culprit.get("line")) if isinstance(x, int))
        if len(lines) == 2:
            values.update(file=waiting["file"], from_line=str(lines[0]), to_line=str(lines[1]))
    fix = _fill(entry, values)
    fix.basis = f"flight-recorder: {state}"
    return fix


# -- filling ----------------------------------------------------------------------------------------

FIELD = re.compile(r"\{(\w+)\}")


def _format(text: str, values: Dict[str, str], language: Optional[str] = None) -> Optional[str]:
    """The text with every {name} filled; None when a name has no value. In shell commands a value
    is quoted where it needs it (not inside quotes already)."""
    missing = []

    def replace(match: re.Match) -> str:
        name = match.group(1)
        value = values.get(name)
        if value is None:
            missing.append(name)
            return match.group(0)
        return filled_value(name, str(value), text, match.start(), language)

    out = FIELD.sub(replace, text)
    return None if missing else out


def _fill(entry: dict, values: Dict[str, str]) -> FixItem:
    prose = {k: v for k, v in values.items()}
    title = _format(" ".join(str(entry.get("title", "")).split()), prose) or entry.get("id", "")
    title = title[:1].upper() + title[1:]
    why = _format(" ".join(str(entry.get("why", "")).split()), prose)
    commands, languages, safeties = [], [], []
    for step in entry.get("steps") or []:
        if not all(values.get(n) for n in step.get("needs") or ()):
            continue
        language = step.get("language", "bash")
        command = _format(str(step["command"]).rstrip("\n"), values, language)
        if command is None:
            continue
        note = _format(str(step.get("note", "")), prose) if step.get("note") else ""
        commands.append(command)
        languages.append(language)
        safeties.append(safety_dict(step["safety"], note or ""))
    fix = FixItem(title=title, commands=commands, languages=languages, safety=safeties)
    why = " ".join((why or "").split())
    fix.why = why[:1].upper() + why[1:] if why else None
    fix.origin = "finding"
    fix.source = entry.get("source")
    return fix


__all__ = ["VALUES", "remedy_for"]
