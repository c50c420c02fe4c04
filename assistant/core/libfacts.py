"""Facts from the libraries: what a stack frame means as a wait, and what a log line means.

The tables are data (skills/data/frames.yaml and skills/data/log-catalog.yaml), each entry cited
from the library's own source. This module only matches against them: callers pass the parsed
entries, nothing here reads a file, so the live path and every pasted-dump reader share one rule.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import cache

from debug_stuck.core.rustnames import rust_v0_path

# The closed lists the tables may use; the YAML files carry a one-line meaning for each.
WAIT_KINDS = (
    "queue", "lock", "condition", "event", "semaphore", "future", "join", "subprocess", "pipe",
    "socket-connect", "socket-accept", "socket-recv", "socket-send", "ssl", "http", "file-open",
    "file-read", "file-write", "flock", "collective", "rendezvous", "cuda-sync", "compile",
    "build-lock", "sleep", "input", "gc", "gil", "import", "busy",
)  # fmt: skip
JOB_FACTS = (
    "dataloader", "distributed", "multiprocess", "threads", "cuda", "rocm", "compile",
    "checkpoint-save", "checkpoint-load", "data-read", "network-client", "tracker", "hub",
    "subprocess", "stdin", "tokenizers", "h5py", "jupyter", "debugger", "launcher", "regex",
)  # fmt: skip

_RUST_HASH = re.compile(r"::h[0-9a-f]{16}$")
_LINE_SUFFIX = re.compile(r":\d+$")
_SPACES = re.compile(r"\s+")


@cache
def _compiled(pattern: str) -> re.Pattern:
    # The tables hold a few hundred patterns: more than re's own cache keeps next to the rest.
    return re.compile(pattern)


def _strip_arguments(name: str) -> str:
    """`f(int, g<(1)>) const` -> `f`: gdb, pystack --native and IPython print argument lists."""
    text = name.rstrip()
    if text.endswith(" const"):
        text = text[: -len(" const")].rstrip()
    if not text.endswith(")"):
        return name.strip()
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        if text[index] == ")":
            depth += 1
        elif text[index] == "(":
            depth -= 1
            if depth == 0:
                head = text[:index].rstrip()
                return head or name.strip()
    return name.strip()


def frame_names(function: str) -> tuple[str, ...]:
    """The names an entry's `function` regex is tried against, most specific first."""
    name = _RUST_HASH.sub("", _strip_arguments(function or ""))
    names = [name]
    rust = rust_v0_path(name)  # py-spy prints Rust's v0-mangled names as they are
    if rust:
        names.insert(0, rust)
    if "::" not in name and "." in name:
        # pystack and some tracebacks give Class.method; py-spy and faulthandler the bare method.
        names.append(name.rsplit(".", 1)[1])
    return tuple(names)


def _frame_file(file: str | None) -> str:
    if not file:
        return ""
    return _LINE_SUFFIX.sub("", file.strip().replace("\\", "/"))


def frame_matches(entries, function: str, file: str | None) -> list[dict]:
    """Every entry that matches the frame, best first: entries pinned to a file before the rest."""
    names = frame_names(function)
    path = _frame_file(file)
    pinned, unpinned = [], []
    for entry in entries:
        pattern = _compiled(entry["function"])
        if not any(pattern.fullmatch(name) for name in names):
            continue
        file_pattern = entry.get("file")
        if file_pattern:
            if path and _compiled(file_pattern).search(path):
                pinned.append(entry)
        else:
            unpinned.append(entry)
    return pinned + unpinned


def match_frame(entries, function: str, file: str | None) -> dict | None:
    """The entry that says what this frame waits on, or None when no library entry covers it."""
    found = frame_matches(entries, function, file)
    return found[0] if found else None


# The names decorators give the function they wrap (functools.wraps keeps __name__ but not the code
# object's name that stacks show): huggingface_hub's validate_hf_hub_args (_inner_fn), torch's
# no_grad (decorate_context), the common hand-written `wrapper`/`inner`. A stack that shows one
# between the job's frame and a library's names the call by the frame inside it.
DECORATOR_WRAPPERS = frozenset(
    "wrapper _wrapper wrapped _wrapped inner _inner inner_fn _inner_fn wrapped_fn decorated decorate_context "
    "new_func".split()
)


def unwrap_call(names, callee: int) -> int:
    """The index of the function the job called, from `callee` (the frame just inside the job's
    own, in `names` innermost first) inward past decorator wrappers."""
    while callee > 0 and names[callee] in DECORATOR_WRAPPERS:
        callee -= 1
    return callee


def innermost_wait(entries, frames) -> tuple[int, dict] | None:
    """(index, entry) of the innermost frame whose entry means a wait (any kind but `busy`): what the
    thread waits on. `frames`: (function, file) pairs, innermost first."""
    for index, (function, file) in enumerate(frames):
        entry = match_frame(entries, function, file)
        if entry is not None and entry.get("wait") != "busy":
            return index, entry
    return None


def computing_routine(entries, frames) -> int | None:
    """The index of the innermost frame that is a library's compute routine (frames.yaml `computes`:
    a parser or serializer whose time grows with its input), or None. `frames`: (function, file) pairs."""
    for index, (function, file) in enumerate(frames):
        if (match_frame(entries, function, file) or {}).get("computes"):
            return index
    return None


def chosen_wait(matched) -> int | None:
    """Of a thread's matched entries (innermost first), the index of the one that says what it
    waits on: CPython's C frame of a call (os.read, a lock's acquire) says how it waits, and a
    library frame above it with a wait of its own says what for (frames.yaml `defers`)."""
    waits = [i for i, e in enumerate(matched) if e.get("wait") != "busy"]
    return next((i for i in waits if not matched[i].get("defers")), waits[0] if waits else None)


def proven_facts(entries, frames) -> set[str]:
    """The job facts (frames.yaml `facts`) that these frames prove; `frames`: (function, file)
    pairs, each distinct one matched once (a job's ranks and threads repeat most of theirs)."""
    found: set[str] = set()
    for function, file in set(frames):
        found.update((match_frame(entries, function, file) or {}).get("facts") or ())
    return found


def _fold(text: str) -> str:
    return _SPACES.sub(" ", text).strip().lower()


def _collapse(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def _groups(entry, text: str) -> dict:
    pattern = entry.get("extract")
    if not pattern:
        return {}
    found = _compiled(pattern).search(_collapse(text))
    if not found:
        return {}
    return {key: value for key, value in found.groupdict().items() if value is not None}


def _line_starts(parts: list[str], separator: str) -> list[int]:
    starts, offset = [], 0
    for part in parts:
        starts.append(offset)
        offset += len(part) + len(separator)
    return starts


def _candidate_lines(prepared, folded: list[str]) -> dict[int, set[int]]:
    """Line -> entries worth checking there: where the entry's longest token occurs, found with
    str.find over the whole text (joined at a space and mid-word) instead of entry by line."""
    candidates: dict[int, set[int]] = {}
    for separator in (" ", ""):
        joined = separator.join(folded)
        starts = _line_starts(folded, separator)
        for number, (_entry, tokens) in enumerate(prepared):
            anchor = max(tokens, key=len)
            position = joined.find(anchor)
            while position != -1:
                line = bisect_right(starts, position) - 1
                for index in (line - 1, line):  # a wrapped message starts on the line before
                    if index >= 0:
                        candidates.setdefault(index, set()).add(number)
                position = joined.find(anchor, position + 1)
    return candidates


def _match_at(entry, tokens, lines, folded, index):
    if all(token in folded[index] for token in tokens):
        return _groups(entry, lines[index])
    if index + 1 >= len(lines) or all(token in folded[index + 1] for token in tokens):
        return None  # the next line reports it on its own
    # Wrapped at a space, or hard-wrapped mid-word by a terminal or a paste.
    for joined in (lines[index] + " " + lines[index + 1], lines[index] + lines[index + 1]):
        if all(token in _fold(joined) for token in tokens):
            return _groups(entry, joined)
    return None


def match_log(entries, text: str) -> list[tuple[dict, dict]]:
    """(entry, extracted groups) for each line of `text` a catalog entry describes, in line order.

    A line matches when every token of the entry is in it (case and whitespace ignored), or in the
    line joined with the next one when the message was wrapped there, at a space or mid-word.
    """
    return [(entry, groups) for _, entry, groups in match_log_lines(entries, (text or "").splitlines())]


def match_log_lines(entries, lines: list[str]) -> list[tuple[int, dict, dict]]:
    """(index of the line, entry, extracted groups) for each of `lines` a catalog entry describes."""
    folded = [_fold(line) for line in lines]
    prepared = [(entry, [_fold(token) for token in entry["tokens"]]) for entry in entries]
    results = []
    for index, numbers in sorted(_candidate_lines(prepared, folded).items()):
        for number in sorted(numbers):
            entry, tokens = prepared[number]
            groups = _match_at(entry, tokens, lines, folded, index)
            if groups is not None:
                results.append((index, entry, groups))
    return results


# An HTTP response whose body stopped part-way, not one that never came: the thread reads the body
# (CPython 3.11.7 Lib/http/client.py HTTPResponse.read/readinto/_safe_read; urllib3 2.x
# urllib3/response.py HTTPResponse.read/stream/read_chunked), and is not waiting for the status
# line and headers (http/client.py HTTPResponse.begin/_read_status, HTTPConnection.getresponse).
_BODY_READ = re.compile(r"^(read|readinto|read1|_safe_read|_fp_read|_raw_read|stream|read_chunked|iter_content)$")
_HEADERS_WAIT = re.compile(r"^(getresponse|begin|_read_status|parse_headers)$")
_HTTP_FILES = re.compile(r"(^|/)(http/client\.py|urllib3/response\.py)$")


def reads_response_body(frames) -> bool:
    """(function, file) pairs of one thread, innermost first: it reads an HTTP response's body."""
    body = headers = False
    for function, file in frames:
        name = (function or "").rsplit(".", 1)[-1]
        if _HTTP_FILES.search(file or ""):
            body = body or bool(_BODY_READ.match(name))
            headers = headers or bool(_HEADERS_WAIT.match(name))
        elif _HEADERS_WAIT.match(name):
            headers = True
    return body and not headers


def called_function(function: str) -> str:
    """The function a job called, from the frame inside it: for a generator or closure defined in
    it (`Response.iter_content.<locals>.generate`), the function it is defined in (`iter_content`)."""
    outer = function.split(".<locals>.", 1)[0] if ".<locals>." in function else function
    return outer.rsplit(".", 1)[-1]


FEEDER_WRITING = "queue feeder: writing into its pipe (multiprocessing/queues.py _feed)"
_QUEUES_FILE = re.compile(r"multiprocess(ing)?/queues\.py$")


def feeder_writing(frames) -> bool:
    """(function, file) pairs of one thread, innermost first: a multiprocessing queue's feeder thread
    (CPython Lib/multiprocessing/queues.py Queue._feed) in the middle of a send, not idle in its
    `notempty.wait()` for the next item (the state every feeder of a live queue sits in)."""
    for index, (function, file) in enumerate(frames):
        if (function or "").rsplit(".", 1)[-1] == "_feed" and _QUEUES_FILE.search(file or ""):
            called = (frames[index - 1][0] or "").rsplit(".", 1)[-1] if index > 0 else ""
            return bool(called) and called != "wait"
    return False


# NVIDIA's CUDA container images set NCCL_VERSION (`ENV NCCL_VERSION` in the nvidia/cuda
# Dockerfiles) to name the library they install: every process in such a container has it,
# whatever backend it uses, so it says nothing about the job's choice.
_INSTALL_ONLY_NCCL_ENV = frozenset({"NCCL_VERSION"})


def sets_nccl(env) -> bool:
    """Whether an environment holds an NCCL setting of the job's own (NCCL_DEBUG, NCCL_SOCKET_IFNAME...)."""
    return any(key.startswith("NCCL_") and key not in _INSTALL_ONLY_NCCL_ENV for key in env or {})
