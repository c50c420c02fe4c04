"""Every rank's stacks and Flight Recorder (FR) entries through torch's debug server: a path that
needs no ptrace and reaches every node the server reaches.

`torch.distributed.debug.start_debug_server()` (torch 2.10+, read in torch 2.13's source) runs
an HTTP frontend on rank 0 (port 25999 by default) and a worker server on every rank. The
frontend's pages answer GET and ask every rank themselves; each page is HTML with one
`<h2>Rank N: ADDRESS</h2>` and one `<pre>` per rank (`<p>Failed to fetch: status=S</p>` before
the `<pre>` when that rank did not answer). We read, with GET only:

- /stacks: each rank's faulthandler dump (`dump_traceback`);
- /fr_trace_json: each rank's FR as JSON (the CPU recorder, gloo included);
- /fr_trace_nccl_json: each rank's NCCL FR (active entries only), where the build has NCCL.

Nothing else: /fr_trace builds torch's own analysis (it fails on gloo dumps in 2.13),
/torchcomms_health_check may trigger dumps into files, /profile and /pyspy_dump run tools in the
job. The workers' own POST handlers are never called. Every request is bounded (connect, read,
size) and every failure is a line "could not ask the debug server at H:P: why".
"""

from __future__ import annotations

import html
import http.client
import json
import re
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from debug_stuck.bounded import CallTimedOut, call_with_timeout
from debug_stuck.core.dumptext import parse_faulthandler
from debug_stuck.core.fr_format import normalize_dump

DEFAULT_PORT = 25999
CONNECT_SECONDS = 3.0
ASK_SECONDS = 30.0  # all pages together; the frontend waits up to its fetch_timeout for each rank
MAX_PAGE_BYTES = 32 << 20
PAGES = {"stacks": "/stacks", "fr": "/fr_trace_json", "fr_nccl": "/fr_trace_nccl_json"}
_SECTION = re.compile(
    r"<h2>Rank (?P<rank>\d+): (?P<addr>[^<]*)</h2>\s*"
    r"(?:<p>Failed to fetch: status=(?P<status>\d+)</p>\s*)?"
    r"<pre>(?P<text>.*?)</pre>",
    re.S,
)


@dataclass
class RankSection:
    rank: int
    address: str
    status: Optional[int]  # None: the rank answered
    text: str


@dataclass
class DebugServerRead:
    host: str
    port: int
    stacks: Dict[int, List[Dict[str, Any]]] = field(default_factory=dict)  # rank -> threads
    fr: Dict[int, Dict[str, Any]] = field(default_factory=dict)  # rank -> normalized FR dump (CPU)
    fr_nccl: Dict[int, Dict[str, Any]] = field(default_factory=dict)  # rank -> normalized NCCL FR dump
    addresses: Dict[int, str] = field(default_factory=dict)  # rank -> its worker server
    errors: List[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    def to_dict(self) -> dict:
        return {
            "server": self.where,
            "stacks": {str(r): t for r, t in sorted(self.stacks.items())},
            "fr_ranks": sorted(self.fr),
            "fr_nccl_ranks": sorted(self.fr_nccl),
            "addresses": {str(r): a for r, a in sorted(self.addresses.items())},
            "errors": list(self.errors),
        }


class _Refused(Exception):
    """One line saying why the server gave no page."""


def _get(host: str, port: int, path: str, deadline: float, max_bytes: int) -> str:
    left = deadline - time.monotonic()
    if left <= 0:
        raise _Refused("no time left")
    conn = http.client.HTTPConnection(host, port, timeout=min(CONNECT_SECONDS, left))
    try:
        conn.connect()
        conn.sock.settimeout(max(0.1, deadline - time.monotonic()))
        conn.request("GET", path, headers={"Accept": "text/html"})
        response = conn.getresponse()
        body = response.read(max_bytes + 1)
        if len(body) > max_bytes:
            raise _Refused(f"{path} is larger than {max_bytes >> 20} MiB")
        if response.status != 200:
            raise _Refused(f"{path} answered HTTP {response.status} {response.reason}")
        return body.decode("utf-8", "replace")
    except socket.timeout:
        raise _Refused(f"{path} did not answer in time") from None
    except ConnectionRefusedError:
        raise _Refused("connection refused (no debug server on that port)") from None
    except (OSError, http.client.HTTPException) as exc:
        raise _Refused(f"{path}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}") from None
    finally:
        conn.close()


def parse_sections(page: str) -> List[RankSection]:
    """The per-rank sections of a frontend page (raw text: the frontend does not escape it)."""
    sections = []
    for m in _SECTION.finditer(page):
        text = m["text"]
        if "&lt;" in text and "<" not in text:  # a frontend that escapes its output
            text = html.unescape(text)
        status = int(m["status"]) if m["status"] else None
        sections.append(RankSection(int(m["rank"]), html.unescape(m["addr"]).strip(), status, text))
    return sections


def parse_stacks(text: str) -> List[Dict[str, Any]]:
    """A faulthandler dump as threads: {"thread", "current", "frames": [{function, file, line}]},
    frames innermost first. The "current" thread is the worker server's, answering us."""
    current = set(re.findall(r"^Current thread (0x[0-9a-f]+)", text, re.M))
    return [
        {
            "thread": ident,
            "current": ident in current,
            "frames": [{"function": f, "file": path, "line": line} for f, path, line in frames],
        }
        for ident, frames in parse_faulthandler(text.splitlines())
    ]


def read_debug_server(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    seconds: float = ASK_SECONDS,
    max_bytes: int = MAX_PAGE_BYTES,
) -> DebugServerRead:
    """Every rank's stacks and FR dumps from the debug server at host:port (read-only, bounded)."""

    def ask() -> DebugServerRead:
        fresh = DebugServerRead(host, port)  # its own object: a reader cut off at the bound changes nothing of ours
        _read_all(fresh, max_bytes, time.monotonic() + seconds)
        return fresh

    try:
        return call_with_timeout(ask, seconds + 1, "debug server")
    except CallTimedOut:
        result = DebugServerRead(host, port)
        result.errors.append(f"could not ask the debug server at {result.where}: no answer within {seconds:g} s")
        return result


def _read_all(result: DebugServerRead, max_bytes: int, deadline: float) -> None:
    for kind, path in PAGES.items():
        try:
            page = _get(result.host, result.port, path, deadline, max_bytes)
        except _Refused as exc:
            result.errors.append(f"could not ask the debug server at {result.where}: {exc}")
            if kind == "stacks":
                return  # the server is not there: the other pages would say the same
            continue
        for section in parse_sections(page):
            result.addresses.setdefault(section.rank, section.address.split("/handler/")[0])
            if section.status == 404 and kind == "fr_nccl":
                continue  # a build without NCCL has no NCCL recorder: nothing is missing
            if section.status is not None:
                detail = " ".join(section.text.split())[:200]
                result.errors.append(f"rank {section.rank} gave no {kind} (HTTP {section.status}: {detail})")
                continue
            problem = _take(result, kind, section)
            if problem:
                result.errors.append(f"rank {section.rank}: unreadable {kind}: {problem}")


def _take(result: DebugServerRead, kind: str, section: RankSection) -> Optional[str]:
    if kind == "stacks":
        result.stacks[section.rank] = parse_stacks(section.text)
        return None
    try:
        dump = normalize_dump(json.loads(section.text))
    except ValueError as exc:
        return str(exc)[:200]
    dump["rank"] = section.rank
    (result.fr if kind == "fr" else result.fr_nccl)[section.rank] = dump
    return None


def parse_address(text: str) -> Tuple[str, int]:
    """ "host:port", "host", ":port" or "[v6]:port" -> (host, port); raises ValueError saying what is valid."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else rest
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:  # a name, or an IPv6 address without a port
        host, port = text, ""
    if port and (not port.isdigit() or not 0 < int(port) < 65536):
        raise ValueError(f"bad debug server address {text!r}: give HOST:PORT, HOST or :PORT (port 1-65535)")
    return host or "127.0.0.1", int(port) if port else DEFAULT_PORT
