"""The output of a distributed run read line by line: how far init got (stages), the network NCCL
chose, and the errors that matter (collective mismatches, watchdog and store timeouts, NCCL WARN,
tracebacks, store keys waited for and never set). Used by the nccl-debug-run probe."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from debug_stuck.probes.targeted.base import Finding

STAGES = ("launched", "rendezvous", "comm-init", "first-collective", "finished")
# Caps that keep the parser's memory bounded whatever the job prints.
MAX_ERRORS = 20
MAX_KEYS = 4000
MAX_TAIL_LINES = 25

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PREFIX = re.compile(r"^\s*(\[rank\d+\]:|\[default\d+\]:|\[\d+,\d+\]<std(?:out|err)>:|\([^)]*pid=\d+[^)]*\))\s?")
_RANK_PREFIX = re.compile(r"\[rank(\d+)\]:")
_RANK_TAG = re.compile(r"^.{0,40}?\[rank(\d+)\]:")

_RENDEZVOUS = re.compile(
    r"TCPStore|client socket has connected|TCP client connected to host|server has started on port|"
    r"[Rr]endezvous|store[_ ]based[_ ]barrier|_create_c10d_store"
)
_STORE_BARRIER = re.compile(r"store based barrier.*?world_size=(\d+), num_workers_joined=(\d+)")
_COMM_START = re.compile(
    r"NCCL INFO (Bootstrap|NET/|Using network|cudaDriverVersion|NCCL_SOCKET_IFNAME|Channel |Ring |Trees|comm 0x)|"
    r"NCCL version \d|ncclCommInitRank|/default_pg/|ProcessGroupGloo|\bGloo\b|connectFullMesh"
)
_COMM_DONE = re.compile(r"Init COMPLETE|ProcessGroupNCCL created ncclComm|pg_wrapper")
_NCCL_COLL = re.compile(
    r"NCCL INFO (AllReduce|Broadcast|AllGather|ReduceScatter|Reduce|Send|Recv|AllToAll|Gather|Scatter): opCount"
)
_RANK_WORD = re.compile(r"\[Rank (\d+)\] Running collective")
_NCCL_SAID = re.compile(r"\bNCCL (INFO|WARN)\b|NCCL version \d")
_FINGERPRINT = re.compile(r"Running collective: CollectiveFingerPrint\((?:SequenceNumber=(\d+), )?OpType=(\w+)")
_COMM_RANKS = re.compile(r"comm 0x[0-9a-f]+ rank (\d+) n[Rr]anks (\d+)")
_COLL_NRANKS = re.compile(r"\[nranks=(\d+)\]")
# A collective was issued (and failed): the job got that far.
_COLLECTIVE_RAN = re.compile(
    r"Watchdog caught collective operation timeout.*?OpType=(\w+)|is running (?:inconsistent )?collective: "
    r"CollectiveFingerPrint\((?:SequenceNumber=\d+, )?OpType=(\w+)"
)
_NCCL_VERSION = re.compile(r"NCCL version (\S+)")

_SOCKET_USING = re.compile(r"NET/Socket ?: Using (.+)$")
_BOOTSTRAP_USING = re.compile(r"Bootstrap ?: Using (.+)$")
_IB_USING = re.compile(r"NET/IB ?: Using (.+?)(?:\s*;\s*OOB (\S+))?\s*$")
_IFACE = re.compile(r"(?:\[\d+\])?([A-Za-z0-9_.\-]+):([0-9A-Za-z_.:%\-]+)<\d+>")
_IB_DEV = re.compile(r"\[\d+\]([A-Za-z0-9_]+:\d+)/(\w+)")
_NETWORK = re.compile(r"Using network (\S+(?: Libfabric)?)")
_IFNAME_ENV = re.compile(r"NCCL_SOCKET_IFNAME set (?:by environment )?to (\S+)")
_TRANSPORT = re.compile(r"via (P2P/IPC|P2P/CUMEM|P2P/direct pointer|P2P/\w+|direct shared memory|SHM|NET/\w+|P2P)")
_STORE_AT = re.compile(r"client socket has connected to \[([^\]]+)\]:(\d+)|TCP client connected to host (\S+):(\d+)")

_MISMATCH = re.compile(
    r"Detected mismatch between collectives|running inconsistent collective|collective operation.{0,80}mismatch|"
    r"[Mm]ismatch.{0,40}between collective"
)
_MISMATCH_DETAIL = re.compile(
    r"Rank (\d+) is running (?:inconsistent )?collective: CollectiveFingerPrint\((.*?)\)\)?, but Rank (\d+) is running "
    r"collective: CollectiveFingerPrint\((.*?)\)\)?\.(?:\s*Collectives differ in the following aspects:\s*(.*))?$"
)
_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+).*?\) ran for (\d+) milli"
)
_COLLECTIVE_TIMEOUT = re.compile(
    r"Timed out waiting \d+ ?ms for (?:recv|send) operation|timed out in blocking wait|failed to pass monitoredBarrier|"
    r"monitoredBarrier.*timed out"
)
_STORE_ERROR = re.compile(
    r"Socket Timeout|Timed out after \d+ seconds waiting for (?:clients|workers)|client socket has timed out|"
    r"DistStoreError|DistNetworkError|failed to connect to any network address|EADDRINUSE|address already in use|"
    r"Timed out initializing process group in store based barrier|wait timeout after \d+ ?ms, keys"
)
_NCCL_WARN = re.compile(r"NCCL WARN (.*)$")
_BENIGN_WARN = re.compile(
    r"Failed to open libibverbs|Unable to load libibverbs|No plugin found|libnccl-net|Could not find real path|"
    r"NET/Plugin|Failed to find ibv_"
)
_NETWORKISH = re.compile(
    r"[Ss]ocket|[Cc]onnect|Net :|NET/|\bIB\b|ibv_|RoCE|GID|[Pp]roxy|[Nn]etwork|unreachable|refused|recv|send|"
    r"timed? ?out"
)
_NCCL_ERROR = re.compile(r"NCCL error|ncclSystemError|ncclInternalError|ncclUnhandledCudaError|ncclRemoteError")
_GLOO_ERROR = re.compile(r"Gloo connectFullMesh failed|Connection (?:closed|reset) by peer")
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):")
_CONSEQUENCE = re.compile(r"ChildFailedError")  # the launcher repeating that a rank failed
_ROOT_CAUSE = re.compile(r"^Root Cause \(first observed failure\)")
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_ROOT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
_STORE_SET = re.compile(r"\b(?:set|add|compareSet|compare_set|get) key:(\S+)")
_STORE_WAIT = re.compile(r"\bwait key_count:\d+ keys\[0\]:(\S+)")
TRACE_NOISE = re.compile(r"\[c10d - (?:trace|debug)\]|NCCL INFO")


def _clean(line: str) -> str:
    return _ANSI.sub("", line).replace("\x00", "")


def _strip_prefix(line: str) -> Tuple[str, str]:
    """(prefix, rest): the per-rank tag launchers put in front of a line, and the line itself."""
    m = _PREFIX.match(line)
    if m:
        return m.group(1), line[m.end() :]
    return "", line


@dataclass
class NcclLog:
    """What the output says, built line by line with bounded memory."""

    lines: int = 0
    rendezvous: bool = False
    comm_init: bool = False
    comm_init_complete: bool = False
    collectives: int = 0
    first_collective: Optional[str] = None
    fingerprints: Dict[str, int] = field(default_factory=dict)
    rank_sequence: Dict[int, Tuple[int, str]] = field(default_factory=dict)  # rank -> (last SequenceNumber, op)
    nccl_lines: int = 0  # lines NCCL itself printed: none means NCCL was not in use
    nccl_version: Optional[str] = None
    nranks: Optional[int] = None
    ranks_seen: set = field(default_factory=set)
    interfaces: List[str] = field(default_factory=list)
    bootstrap: List[str] = field(default_factory=list)
    ib_devices: List[str] = field(default_factory=list)
    network: Optional[str] = None
    ifname_env: Optional[str] = None
    transports: Dict[str, int] = field(default_factory=dict)
    store: Optional[str] = None
    store_barrier: Optional[Tuple[int, int]] = None
    errors: List[Finding] = field(default_factory=list)
    benign_warnings: List[str] = field(default_factory=list)
    tracebacks: List[str] = field(default_factory=list)
    root_cause: Dict[str, int] = field(default_factory=dict)
    keys_set: set = field(default_factory=set)
    keys_waited: Dict[str, int] = field(default_factory=dict)
    tail: List[str] = field(default_factory=list)
    _open_tb: Dict[str, int] = field(default_factory=dict)  # prefix -> lines seen in that traceback
    _in_root_cause: int = 0
    _seen_errors: set = field(default_factory=set)

    # -- feeding -----------------------------------------------------------------------------

    def feed(self, raw: str) -> None:
        line = _clean(raw).rstrip()
        if not line.strip():
            return
        self.lines += 1
        prefix, rest = _strip_prefix(line)
        rank = _RANK_TAG.match(line)
        if rank:
            self.ranks_seen.add(int(rank.group(1)))
        if not TRACE_NOISE.search(line):
            self.tail.append(line[:400])
            if len(self.tail) > MAX_TAIL_LINES:
                del self.tail[0]
        self._stages(line)
        self._network(line)
        self._store_keys(line)
        self._traceback(prefix, rest)
        self._root_cause(rest)
        self._errors(line)

    def _stages(self, line: str) -> None:
        if _RENDEZVOUS.search(line):
            self.rendezvous = True
        m = _STORE_BARRIER.search(line)
        if m:
            self.rendezvous = True
            self.store_barrier = (int(m.group(1)), int(m.group(2)))
        if _COMM_START.search(line):
            self.comm_init = True
        if _COMM_DONE.search(line):
            self.comm_init = self.comm_init_complete = True
        m = _COMM_RANKS.search(line)
        if m:
            self.comm_init = True
            self.ranks_seen.add(int(m.group(1)))
            self.nranks = int(m.group(2))
        m = _NCCL_VERSION.search(line)
        if m and not self.nccl_version:
            self.nccl_version = m.group(1)
        m = _COLL_NRANKS.search(line)
        if m:
            self.nranks = int(m.group(1))
        m = _COLLECTIVE_RAN.search(line)
        if m:
            self.first_collective = self.first_collective or m.group(1) or m.group(2)
            self.rendezvous = self.comm_init = self.comm_init_complete = True
        if _NCCL_SAID.search(line):
            self.nccl_lines += 1
        coll = _NCCL_COLL.search(line)
        fp = _FINGERPRINT.search(line)
        if fp and fp.group(1) is not None:
            tag = _RANK_TAG.match(line) or _RANK_WORD.search(line)
            if tag:
                self.rank_sequence[int(tag.group(1))] = (int(fp.group(1)), fp.group(2))
        if coll or fp:
            self.collectives += 1
            op = coll.group(1) if coll else fp.group(2)
            if fp:
                self.fingerprints[op] = self.fingerprints.get(op, 0) + 1
            if self.first_collective is None:
                self.first_collective = op
            # A collective ran, so whatever came before it completed.
            self.rendezvous = self.comm_init = self.comm_init_complete = True

    def _network(self, line: str) -> None:
        m = _SOCKET_USING.search(line)
        if m:
            for name, addr in _IFACE.findall(m.group(1)):
                _add_unique(self.interfaces, f"{name}:{addr}")
        m = _BOOTSTRAP_USING.search(line)
        if m:
            for name, addr in _IFACE.findall(m.group(1)):
                _add_unique(self.bootstrap, f"{name}:{addr}")
        m = _IB_USING.search(line)
        if m:
            for dev, kind in _IB_DEV.findall(m.group(1)):
                _add_unique(self.ib_devices, f"{dev}/{kind}")
            if m.group(2):
                for name, addr in _IFACE.findall(m.group(2)):
                    _add_unique(self.bootstrap, f"{name}:{addr}")
        m = _NETWORK.search(line)
        if m:
            self.network = m.group(1)
        m = _IFNAME_ENV.search(line)
        if m:
            self.ifname_env = m.group(1).rstrip(".")
        m = _TRANSPORT.search(line)
        if m:
            kind = _transport_kind(m.group(1))
            self.transports[kind] = self.transports.get(kind, 0) + 1
        m = _STORE_AT.search(line)
        if m and not self.store:
            host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            self.store = f"{host.replace('::ffff:', '')}:{port}"

    def _store_keys(self, line: str) -> None:
        # c10d's store logs (TORCH_CPP_LOG_LEVEL=INFO) every wait and the get that follows once the
        # key exists: a key waited for and never set or got is one some rank never published.
        m = _STORE_SET.search(line)
        if m:
            if len(self.keys_set) < MAX_KEYS:
                self.keys_set.add(m.group(1))
            self.keys_waited.pop(m.group(1), None)
            return
        m = _STORE_WAIT.search(line)
        if m and m.group(1) not in self.keys_set and len(self.keys_waited) < MAX_KEYS:
            self.keys_waited[m.group(1)] = self.keys_waited.get(m.group(1), 0) + 1

    def _traceback(self, prefix: str, rest: str) -> None:
        if _TRACEBACK.match(rest):
            self._open_tb[prefix] = 0
            return
        if prefix not in self._open_tb:
            return
        self._open_tb[prefix] += 1
        # Frames and source lines are indented; the first unindented line ends the traceback.
        if rest[:1] in (" ", "\t") or not rest.strip():
            if self._open_tb[prefix] > 400:
                del self._open_tb[prefix]
            return
        if rest.startswith(("During handling", "The above exception")):
            return
        del self._open_tb[prefix]
        if _CONSEQUENCE.search(rest):
            return
        text = f"{prefix} {rest}".strip() if prefix else rest
        if len(self.tracebacks) < MAX_ERRORS:
            self.tracebacks.append(text[:600])
        cause, message = _classify_error(rest, self.comm_init_complete)
        if message is None:
            who = _RANK_PREFIX.match(prefix or "")
            who_text = f"rank {who.group(1)} " if who else (f"{prefix} " if prefix else "")
            message = f"{who_text}raised {rest.strip()[:300]}"
        self._error(cause, message, key=_norm(rest))

    def _root_cause(self, rest: str) -> None:
        if _ROOT_CAUSE.match(rest.strip()):
            self._in_root_cause = 12
            return
        if self._in_root_cause <= 0:
            return
        self._in_root_cause -= 1
        m = _ROOT_RANK.match(rest)
        if m and "rank" not in self.root_cause:
            self.root_cause["rank"] = int(m.group(1))
        m = _ROOT_EXIT.match(rest)
        if m and "exitcode" not in self.root_cause:
            self.root_cause["exitcode"] = int(m.group(1))

    def _errors(self, line: str) -> None:
        m = _NCCL_WARN.search(line)
        if m:
            text = m.group(1).strip()
            if _BENIGN_WARN.search(text):
                if len(self.benign_warnings) < 5:
                    _add_unique(self.benign_warnings, text[:200])
                return
            if _NETWORKISH.search(text):
                cause = "network" if self.comm_init_complete else "nccl-init"
            else:
                cause = "collective" if self.comm_init_complete else "nccl-init"
            when = "after" if self.comm_init_complete else "during"
            self._error(cause, f"NCCL WARN {when} communicator init: {text[:300]}", key="warn " + _norm(text))
            return
        if _TRACEBACK.search(line):
            return
        cause, message = _classify_error(line, self.comm_init_complete)
        if message:
            self._error(cause, message, key=_norm(line))

    def _error(self, cause: Optional[str], message: str, key: str) -> None:
        # The same error is printed by every rank and again in each traceback: report it once.
        short = _dedupe_key(message) or key
        if short in self._seen_errors or len(self.errors) >= MAX_ERRORS:
            return
        self._seen_errors.add(short)
        self.errors.append(Finding("fail", message, cause))

    # -- results -----------------------------------------------------------------------------

    def sequence_gap(self) -> Optional[Tuple[List[int], int, str, List[int]]]:
        """(ranks behind, the collective number they never entered, its op, ranks waiting in it) when
        the ranks' last collective fingerprints differ; None when they agree or one rank is seen."""
        if len(self.rank_sequence) < 2:
            return None
        top = max(seq for seq, _ in self.rank_sequence.values())
        behind = sorted(r for r, (seq, _) in self.rank_sequence.items() if seq < top)
        if not behind:
            return None
        ahead = sorted(r for r, (seq, _) in self.rank_sequence.items() if seq == top)
        op = self.rank_sequence[ahead[0]][1]
        return behind, top, op, ahead

    def stage(self, exit_code: Optional[int]) -> str:
        if exit_code == 0 and not self.errors:
            return "finished"
        if self.collectives or self.first_collective:
            return "first-collective"
        if self.comm_init:
            return "comm-init"
        if self.rendezvous:
            return "rendezvous"
        return "launched"

    def missing_keys(self) -> List[str]:
        """Store keys some rank waits for that no rank ever set, oldest first."""
        return [k for k in self.keys_waited if k not in self.keys_set and not k.rstrip("/").endswith("init")]

    def missing_ranks(self) -> List[int]:
        out = []
        for key in self.missing_keys():
            tail = key.rstrip("/").rsplit("/", 1)[-1]
            if tail.isdigit():
                out.append(int(tail))
        return sorted(set(out))

    def to_dict(self) -> dict:
        return {
            "lines": self.lines,
            "rendezvous": self.rendezvous,
            "comm_init": self.comm_init,
            "comm_init_complete": self.comm_init_complete,
            "collectives_seen": self.collectives,
            "first_collective": self.first_collective,
            "collective_fingerprints": dict(self.fingerprints),
            "rank_sequence": {str(r): {"seq": seq, "op": op} for r, (seq, op) in sorted(self.rank_sequence.items())},
            "nccl_in_use": self.nccl_lines > 0,
            "nccl_version": self.nccl_version,
            "nranks": self.nranks,
            "ranks_seen": sorted(self.ranks_seen),
            "interfaces": list(self.interfaces),
            "bootstrap_interfaces": list(self.bootstrap),
            "ib_devices": list(self.ib_devices),
            "network": self.network,
            "nccl_socket_ifname": self.ifname_env,
            "transports": dict(self.transports),
            "store": self.store,
            "store_barrier": (
                {"world_size": self.store_barrier[0], "joined": self.store_barrier[1]} if self.store_barrier else None
            ),
            "waiting_for_store_keys": self.missing_keys()[:10],
            "missing_ranks": self.missing_ranks(),
            "errors": [f.to_dict() for f in self.errors],
            "benign_nccl_warnings": list(self.benign_warnings),
            "tracebacks": list(self.tracebacks),
            "root_cause": dict(self.root_cause) or None,
            "tail": list(self.tail),
        }


def _add_unique(items: list, value: str) -> None:
    if value not in items and len(items) < 32:
        items.append(value)


def _transport_kind(text: str) -> str:
    if text.startswith("P2P"):
        for kind in ("IPC", "CUMEM", "direct"):
            if kind in text:
                return f"P2P/{kind}"
        return "P2P"
    if text == "direct shared memory" or text.startswith("SHM"):
        return "SHM"
    return text  # NET/Socket, NET/IB, NET/AWS...


def _norm(text: str) -> str:
    text = _RANK_PREFIX.sub("", text)
    return re.sub(r"\d+", "N", text.strip())[:200]


def _dedupe_key(message: str) -> str:
    # "[Rank 0]: Rank 1 failed..." / "RuntimeError: [Rank 0]: Ranks 1 failed...": one error.
    text = re.sub(r"\b[\w.]*(?:Error|Exception): ", "", message).lower().replace("ranks ", "rank ")
    return re.sub(r"\d+", "N", text)[:160]


def _classify_error(line: str, comm_done: bool) -> Tuple[Optional[str], Optional[str]]:
    """(cause, message) for one line that names a known distributed failure; (None, None) otherwise."""
    if _MISMATCH.search(line):
        m = _MISMATCH_DETAIL.search(line)
        if m:
            a, fa, b, fb, aspects = m.groups()
            if int(b) < int(a):  # each rank prints the pair from its side: one order for both
                a, fa, b, fb = b, fb, a, fa
            message = (
                f"collective mismatch (TORCH_DISTRIBUTED_DEBUG=DETAIL): rank {a} runs {_fp(fa)}, "
                f"rank {b} runs {_fp(fb)}"
            )
            if aspects:
                message += f"; they differ in {_aspects(aspects)}"
            return "collective", message
        return "collective", f"collective mismatch: {_after_colon(line)[:300]}"
    m = _WATCHDOG.search(line)
    if m:
        seq, op, ms = m.groups()
        return "collective", f"NCCL watchdog: collective {op} (SeqNum={seq}) ran {int(ms) // 1000} s and timed out"
    if _COLLECTIVE_TIMEOUT.search(line):
        return "collective", f"collective timed out: {_after_colon(line)[:300]}"
    if _STORE_ERROR.search(line):
        text = _after_colon(line)
        if "EADDRINUSE" in line or "address already in use" in line:
            return "rendezvous", f"the c10d store port is already in use (another job, or a stale run): {text[:240]}"
        return "rendezvous", f"c10d store (rendezvous) error: {text[:300]}"
    if _NCCL_ERROR.search(line):
        if comm_done:
            cause = (
                "network"
                if re.search(r"ncclSystemError|ncclRemoteError|remote process|network", line)
                else "collective"
            )
        else:
            cause = "nccl-init"
        return cause, f"NCCL error: {_after_colon(line)[:300]}"
    if _GLOO_ERROR.search(line):
        if "connectFullMesh" in line:
            return (
                "nccl-init",
                f"gloo could not connect its ranks (check GLOO_SOCKET_IFNAME): {_after_colon(line)[:240]}",
            )
        return "network", f"gloo peer connection lost (often a peer rank that died first): {_after_colon(line)[:240]}"
    return None, None


def _after_colon(line: str) -> str:
    _, rest = _strip_prefix(line.strip())
    rest = re.sub(r"^\[[A-Z]\d{4} [^\]]*\]\s*", "", rest)  # glog header "[E1122 04:42:56.3 file.cpp:12]"
    return rest.strip()


def _fp(text: str) -> str:
    op = re.search(r"OpType=(\w+)", text or "")
    shape = re.search(r"TensorShape=(\[[^\]]*\])", text or "")
    out = op.group(1) if op else "?"
    return f"{out} {shape.group(1)}" if shape else out


def _aspects(text: str) -> str:
    names = re.findall(
        r"(Sequence number|Op type|Tensor Tensor shapes|Tensor Tensor dtypes|Tensor Tensor devices)", text
    )
    cleaned = [n.replace("Tensor Tensor ", "tensor ") for n in names]
    return ", ".join(dict.fromkeys(cleaned)) or text.strip()[:120]


def parse_lines(lines) -> NcclLog:
    log = NcclLog()
    for line in lines:
        log.feed(line)
    return log
