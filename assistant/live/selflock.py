"""A thread that waits for a lock its own outer frame holds: the `with` (or `.acquire()`) at its
innermost line of the job's own code asks for a lock that a `with` enclosing the call in an outer
frame of the same file took. Read from the job's source (as the job sees it), never run. A
threading.Lock blocks even the thread that holds it (Python docs, threading.Lock), so such a wait
ends never, whatever else the thread was doing: a helper calling back into locked code, or a
signal handler (run between two bytecodes of the interrupted frame) taking the lock that frame holds."""

from __future__ import annotations

import ast
import os
import re
from collections import deque
from typing import List, Optional, Sequence, Tuple

from debug_stuck.live.loops import _parsed, enclosing_function, is_library, job_roots, own_frame_index


def source_of(path: Optional[str], pid) -> Optional[str]:
    """The text of a source file as the job `pid` sees it (its mount namespace), or None."""
    if not path or not os.path.isabs(path):
        return None
    from debug_stuck.recovery.reading import read_source, seen_from

    try:
        with seen_from(int(pid)):
            return read_source(path) or None
    except (TypeError, ValueError):
        return read_source(path) or None


def parse_source(text: Optional[str]) -> Optional[ast.AST]:
    """The job's source parsed, or None (no text, or not Python this interpreter reads); once per text
    (live.loops._parsed): the same few files are read frame after frame, thread after thread."""
    return _parsed(text) if text else None


def frame_source(frame, pid) -> Optional[str]:
    """The source of a stack frame's file, as the job `pid` sees it."""
    return source_of(getattr(frame, "path", None) or frame.file, pid)


def attribute_calls(node: Optional[ast.AST], methods) -> List[Tuple[ast.Call, str]]:
    """(call, its receiver as the code writes it) for each `x.m(...)` under node with m in methods."""
    return [
        (call, ast.unparse(call.func.value))
        for call in (ast.walk(node) if node is not None else ())
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in methods
    ]


def receivers_at(node: Optional[ast.AST], methods, line: Optional[int]) -> List[str]:
    """The receiver of each `x.m(...)` call with m in methods on `line` (`q` for `q.put(item)`)."""
    return [receiver for call, receiver in attribute_calls(node, methods) if call.lineno == line]


def call_name(call: ast.Call) -> Optional[str]:
    """The name of the function a call calls: `f` for `f(...)` and for `x.f(...)`."""
    return getattr(call.func, "attr", None) or getattr(call.func, "id", None)


def named_calls(node: Optional[ast.AST], names) -> List[ast.Call]:
    """Each call under node of a function named in names, as `f(...)` or as `x.f(...)`."""
    return [
        call
        for call in (ast.walk(node) if node is not None else ())
        if isinstance(call, ast.Call) and call_name(call) in names
    ]


def locks_at(text: Optional[str], line) -> Tuple[List[str], Optional[str]]:
    """([locks held, outermost first], the lock waited for) at a line: the `with` statements (and
    .acquire() calls) of its function, or of the module's own code, that enclose the line."""
    return locks_in(parse_source(text), line)


def locks_in(tree: Optional[ast.AST], line) -> Tuple[List[str], Optional[str]]:
    """locks_at on a source already parsed."""
    if tree is None or not isinstance(line, int):
        return [], None
    scope = enclosing_function(tree, line) or tree  # a loop at module level holds its locks too
    held: List[str] = []
    wanted = None
    for node in scope_nodes(scope):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            names = [ast.unparse(item.context_expr) for item in node.items]
            if node.lineno == line:
                wanted = names[-1]
                held += names[:-1]
            elif node.lineno < line <= (node.end_lineno or node.lineno):
                held += names
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "acquire":
            name = ast.unparse(node.func.value)
            if node.lineno == line:
                wanted = name
            elif node.lineno < line:
                held.append(name)
    return list(dict.fromkeys(held)), wanted


def scope_nodes(scope):
    """The nodes of a function (or of the module's own code), breadth first, without the bodies of the
    functions and classes defined in it: a `with` or an acquire() there runs elsewhere."""
    queue = deque(ast.iter_child_nodes(scope))
    while queue:
        node = queue.popleft()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            queue.extend(ast.iter_child_nodes(node))


def lock_held_by_outer(
    pid, own: Sequence[Tuple[Optional[str], object]], through_manager: bool = False
) -> Optional[Tuple[str, int, int]]:
    """(the lock's expression, the index of the outer frame that holds it, the index of the frame that
    asks for it) when the innermost of a thread's own frames (`own`: (file, line) of each, innermost
    first) asks for a lock that an outer frame of the same file holds; else None. `through_manager`
    (a wait known to be for a lock: flock): when the innermost asks for none but the next one is at a
    `with` line, the thread is inside that `with`'s context manager (a function of the job's that takes
    a file lock, `with locked(path):`), so that line asks. Each file is read and parsed once."""
    for inner in ((0, 1) if through_manager else (0,))[: max(0, len(own) - 1)]:
        path = own[inner][0]
        tree = parse_source(source_of(path, pid))
        _, wanted = locks_in(tree, own[inner][1])
        if not wanted:
            continue
        for index, (file, line) in enumerate(own[inner + 1 :], start=inner + 1):
            if file != path:
                continue  # the same name in another module is another object
            held, _ = locks_in(tree, line)
            if wanted in held:
                return wanted, index, inner
        return None
    return None


def self_held_lock(pid: int, frames, through_manager: bool = False) -> Optional[Tuple[str, object, object]]:
    """(the lock's expression, the outer frame that holds it, the inner frame that asks for it) for
    a thread (frames innermost first) that waits for a lock it holds itself; else None."""
    roots = job_roots([frames])
    own = [f for f in frames if not f.native and (f.path or f.file or "").endswith(".py") and not is_library(f, roots)]
    found = lock_held_by_outer(pid, [(f.path or f.file, f.line) for f in own], through_manager)
    return (found[0], own[found[1]], own[found[2]]) if found is not None else None


# multiprocessing's fork start method runs the child's target from the frame that forked: the
# parent's frames stay on the child's stack below it (popen_fork.py Popen._launch: os.fork(), then
# process_obj._bootstrap() in the child, which ends with os._exit)
FORK_BOUNDARY = re.compile(r"(^|/)multiprocessing/(popen_fork|process)\.py$")


def forked_between(frames, outer, inner) -> bool:
    """Whether a fork boundary lies between two frames of the thread (innermost first)."""
    ids = [id(f) for f in frames]
    low, high = sorted((ids.index(id(inner)), ids.index(id(outer))))
    return any(not f.native and FORK_BOUNDARY.search(f.path or f.file or "") for f in frames[low + 1 : high])


def signal_handler_between(pid, own: Sequence[Tuple[Optional[str], object, str]], outer: int) -> Optional[str]:
    """The name of a signal handler among the frames inside the one that holds the lock (`own`: (file,
    line, function) of each of the job's own frames, innermost first; `outer`: the holder's index): a
    function the job registers with signal.signal(SIG, name) in its file. Python runs the handler in
    the main thread between two bytecodes of the interrupted frame (Python docs, signal)."""
    for file, _, function in own[:outer]:
        tree = parse_source(source_of(file, pid))
        if tree is None:
            continue
        for node in named_calls(tree, ("signal",)):
            if len(node.args) == 2 and isinstance(node.args[1], ast.Name) and node.args[1].id == function:
                return function
    return None


def self_held_wait(pid: int, frames, where: Optional[str], file_lock: bool = False) -> Optional[Tuple[str, str]]:
    """(`end`, the wait's words) when the thread waits for a lock it holds itself (self-held), or for one
    the parent's frame held when it forked this process (fork-held); else None. `file_lock`: a flock
    its own process holds (/proc/locks), asked for inside a context manager of the job's."""
    held = self_held_lock(pid, frames, through_manager=file_lock)
    if held is None:
        return None
    lock, outer, inner = held
    took = f"{outer.function} ({outer.file}:{outer.line})"
    if forked_between(frames, outer, inner):
        return "fork-held", (
            f"waits at {where} for `{lock}`, which its parent held at {took} when it forked this process "
            "there: fork copies the lock held, and the frame that holds it is the parent's copy, which never "
            "runs again here"
        )
    roots = job_roots([frames])
    own = [f for f in frames if not f.native and (f.path or f.file or "").endswith(".py") and not is_library(f, roots)]
    handler = signal_handler_between(pid, [(f.path or f.file, f.line, f.bare_name) for f in own], own.index(outer))
    if handler is not None:
        return "self-held", (
            f"waits at {where} for `{lock}`, which the code its signal handler {handler} interrupted took at {took} "
            "and still holds: Python runs a handler in the main thread, between two steps of that code"
        )
    if file_lock:
        return "self-held", (
            f"waits at {where} for `{lock}`, which it took itself at {took} and still holds: a lock on the file "
            "taken through another open of it (/proc/locks names this process) blocks even its own holder"
        )
    return "self-held", f"waits at {where} for `{lock}`, which it took itself at {took} and still holds"


def own_lock_holder(job, hop, thread) -> Optional[Tuple[int, int]]:
    """(pid, tid) of the other thread of hop's process whose own frame sits inside the `with` (or
    after the acquire()) of the lock that thread's own frame asks for, by the source of each: a file
    lock its own process holds (/proc/locks) is held by one of its threads. The hop names it
    (`holder_thread`, `holder_at`: where that thread is, inside the `with`); None when no thread's source says so."""
    index = own_frame_index(thread.frames)
    if index is None:
        return None
    frame = thread.frames[index]
    _, wanted = locks_at(frame_source(frame, hop.pid), frame.line)
    if wanted is None:
        return None
    for other in job.threads(hop.pid):
        at = own_frame_index(other.frames) if other.tid != thread.tid else None
        if at is None:
            continue
        site = other.frames[at]
        held, _ = locks_at(frame_source(site, hop.pid), site.line)
        if wanted in held:
            hop.facts.update(holder_thread=other.name or str(other.tid), holder_at=site.text())
            hop.detail += f"; thread {other.name or other.tid!r} holds it at {site.text()}, inside `with {wanted}`"
            return hop.pid, other.tid
    return None
