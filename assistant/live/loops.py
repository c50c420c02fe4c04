"""Whose code a frame is, and whether a busy thread turns in one loop of its own code.

Two samples of a busy thread cannot tell a long computation from an endless loop by motion alone:
both change line. What separates them is where the time goes. A thread that never leaves one
function of the job's own code, calling at most the standard library (``os.path.exists``,
``time.time``), turns in a loop of its own: nothing outside it can end the loop but a condition
it polls. A thread whose samples go down into a library's compute (a model's forward through
torch, numpy) is doing work that ends when the data does. The first is stuck on its own loop;
the second is busy, which is progress until other evidence (the log's rhythm) says otherwise.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from typing import List, Optional, Sequence

from debug_stuck.core.libfacts import computing_routine
from debug_stuck.core.owncode import STDLIB, entry_script_roots, is_library_code
from debug_stuck.live.jobfacts import frames_table


def is_stdlib(frame) -> bool:
    top = (frame.file or "").replace("\\", "/").lstrip("./").split("/", 1)[0]
    top = top[:-3] if top.endswith(".py") else top
    return top in STDLIB or top.startswith("<frozen")


# The interpreter's own machine code and the C library under it: a builtin (a regex match, sum() of a
# list) or a standard-library extension module (lib-dynload) runs here. Any other shared object is a
# library's native code: numpy's BLAS, torch's kernels (libtorch_cpu.so), a Rust or C++ extension.
INTERPRETER_CODE = re.compile(r"^(python[\d.]*|libpython[\d.]+\S*|libc[.-]\S*|ld-linux\S*|libpthread\S*|libm[.-]\S*)$")
# A GPU's driver, runtime or collective library: a host thread held in one for a whole window deals
# with its device (a sync, a launch, a collective's proxy), whose readings judge it, not the CPU's.
GPU_RUNTIME_CODE = re.compile(r"^(libcuda|libcudart|libnccl|librccl|libamdhip64|libhsa-runtime64|libnvidia-)\S*$")
C_SOURCE = re.compile(r"\.(c|h|cc|cpp)$")  # py-spy's file for a native frame read with its symbols


SLEEP_CALLS = {"clock_nanosleep", "__clock_nanosleep", "nanosleep", "__nanosleep", "time_sleep", "pysleep"}


def sleeping_frames(frames) -> bool:
    """The thread's innermost native frames are a sleep (libc's clock_nanosleep under CPython's
    time.sleep), when its native frames were read."""
    native = [f for f in frames[:3] if f.native]
    return bool(native) and native[0].function in SLEEP_CALLS


def library_native_frame(frames):
    """The innermost named native frame of a library's machine code that the thread's innermost Python
    frame called into (`frames` innermost first, as py-spy --native and pystack --native give them), or
    None when it runs the interpreter's own code or a GPU runtime's (a device wait, judged by the GPU
    readings), or no native frame was read."""
    for frame in frames:
        if not frame.native:
            return None
        where = (frame.module or frame.file or "").replace("\\", "/")  # the shared object, or its C source
        name = where.rsplit("/", 1)[-1]
        if "/lib-dynload/" in where or INTERPRETER_CODE.match(name) or frame.function.startswith("0x"):
            continue
        if frame.module is None and C_SOURCE.search(name):
            continue  # a C source file and no shared object named: most likely the interpreter's own
        return None if GPU_RUNTIME_CODE.match(name) else frame
    return None


def library_at_work(frames, own: int):
    """The frame under the job's own frame (`frames[:own]`, innermost first) that shows a library at
    work, or None when only the standard library and the interpreter run there: a library's Python
    frame, else a standard-library routine whose time grows with its input (frames.yaml `computes`: a
    JSON parse, an unpickling), else a library's native code (library_native_frame)."""
    under = frames[:own]
    found = next((f for f in under if not f.native and not is_stdlib(f)), None)
    if found is not None:
        return found
    routine = computing_routine(frames_table() or [], [(f.bare_name, f.file) for f in under])
    return under[routine] if routine is not None else library_native_frame(frames)


def job_roots(thread_frames) -> List[str]:
    """The job's own folders: where the entry script of each thread's outermost `<module>` frame
    lies (core.owncode), from lists of a process's frames (innermost first)."""
    outer = []
    for frames in thread_frames:
        python = [f for f in frames if not f.native]
        if python and python[-1].function == "<module>":
            outer.append(python[-1].path or python[-1].file)
    return entry_script_roots(outer)


def is_library(frame, roots: Sequence[str] = ()) -> bool:
    """A frame of the standard library or a library, not the job's own code (core.owncode); under
    the job's own folders (`roots`) a short name is the job's: its own `datasets/` is not HF's."""
    return is_library_code(frame.file, frame.path, roots)


def waits_in_own_code(frames) -> bool:
    """The innermost Python frame is the job's own code: it called the wait (time.sleep) itself."""
    python = [i for i, f in enumerate(frames) if not f.native]
    return bool(python) and own_frame_index(frames) == python[0]


def own_frame_index(frames, roots: Optional[Sequence[str]] = None) -> Optional[int]:
    """The index (innermost first) of the innermost Python frame of the job's own code. Without
    `roots`, the job's folders are read from the thread's own outermost frame."""
    if roots is None:
        roots = job_roots([frames])
    for index, frame in enumerate(frames):
        if not frame.native and not is_library(frame, roots):
            return index
    return None


def _samples(series, tid: int) -> List[list]:
    out = []
    for dump in series.dumps if series is not None else []:
        thread = next((t for t in dump.threads if t.tid == tid), None)
        if thread is not None:
            out.append(list(thread.frames))
    return out


def own_loop(series, tid: int):
    """The frame of the job's own code in which the thread turns, or None.

    It turns there when, in every sample (at least two), its innermost frame of the job's own code
    is the same function and nothing below it but the standard library runs."""
    samples = _samples(series, tid)
    if len(samples) < 2:
        return None
    roots = job_roots([t.frames for dump in series.dumps for t in dump.threads])
    owners = set()
    last = None
    for frames in samples:
        index = own_frame_index(frames, roots)
        if index is None:
            return None
        if library_at_work(frames, index) is not None:
            return None  # it went down into a library's code: work, not a poll
        owner = frames[index]
        owners.add((owner.bare_name, owner.file))
        last = owner
    return last if len(owners) == 1 else None


LOOP_HEADER_CHARS = 160


@lru_cache(maxsize=8)
def _parsed(source: str):
    """The source parsed, or None; once per text: the loop, call and function readers of one
    diagnosis read the same few files, line after line."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def enclosing_function(tree: ast.AST, line: int):
    """The innermost function definition that spans `line`, or None (module level)."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                if best is None or node.lineno > best.lineno:
                    best = node
    return best


def loops_around(tree: ast.AST, line: int) -> list:
    """Every `while` or `for` loop of `tree` that spans `line`, its header included."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)) and node.lineno <= line <= (node.end_lineno or line)
    ]


def innermost_loop(source: str, line: int):
    """The innermost `while` or `for` loop of `source` whose body holds `line` (an ast node), or None
    when the source does not parse or no loop holds the line."""
    tree = _parsed(source)
    return _loop_in(tree, line) if tree is not None else None


def _loop_in(tree, line: int):
    found = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.While, ast.For, ast.AsyncFor)) and node.body:
            if node.body[0].lineno <= line <= (node.end_lineno or node.lineno):
                if found is None or node.lineno > found.lineno:
                    found = node
    return found


def loop_header(source: str, line: int) -> Optional[str]:
    """The header of the innermost `while` or `for` loop of `source` whose body holds `line` (a sleep
    the job's own code makes between looks), as written (`while not os.path.exists(done):`), on one
    line and cut to LOOP_HEADER_CHARS; None when the file does not parse or no loop holds the line.
    It names what the loop waits for: a loop polls until its condition changes."""
    found = innermost_loop(source, line)
    if found is None:
        return None

    def text(node) -> str:
        return " ".join((ast.get_source_segment(source, node) or ast.unparse(node)).split())

    if isinstance(found, ast.While):
        header = f"while {text(found.test)}"
    else:
        header = (
            f"{'async for' if isinstance(found, ast.AsyncFor) else 'for'} {text(found.target)} in {text(found.iter)}"
        )
    return _cut(header)


def growing_sleep(source: str, line: int) -> Optional[str]:
    """The name of the delay a loop of `source` holding `line` sleeps, when the loop itself changes it
    (`time.sleep(delay)` and `delay = min(delay * 2, 60)` in its body): a wait with backoff, whose
    looks grow apart. None for a fixed sleep, or a source that does not parse."""
    loop = innermost_loop(source, line)
    if loop is None:
        return None
    slept = set()
    changed = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.Call) and node.args:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name == "sleep":
                slept |= {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            changed |= {t.id for t in targets if isinstance(t, ast.Name)}
    grown = sorted(slept & changed)
    return grown[0] if grown else None


def _statement_at(tree, line: int):
    """The innermost statement of `tree` whose lines hold `line`, or None."""
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if found is None or node.lineno >= found.lineno:
                found = node
    return found


def _functions_defined(tree) -> set:
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _passed_functions(call, defined: set) -> list:
    """The job's functions that `call` takes as values among its arguments (`key=by_length`,
    `map(self.clean, rows)`, `cmp_to_key(cmp)` nested inside one), and its lambdas: what the called
    routine calls back for each item."""
    found = []
    for value in list(call.args) + [k.value for k in call.keywords]:
        for node in ast.walk(value):
            if isinstance(node, ast.Lambda):
                found.append(node)
            elif isinstance(node, ast.Name) and node.id in defined:
                found.append(node)
            elif isinstance(node, ast.Attribute) and node.attr in defined:
                found.append(node)
    return [n for n in found if not any(isinstance(c, ast.Call) and c.func is n for c in ast.walk(value))]


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LOOP_HEADER_CHARS else text[: LOOP_HEADER_CHARS - 3] + "..."


def call_with_callback(source: str, line: int, callee: Optional[str] = None) -> Optional[tuple]:
    """(the call as written, the function it calls back) when the statement of `source` at `line` calls
    a routine with one of the job's own functions (a `def` of this file) or a lambda as an argument:
    `sorted(order, key=functools.cmp_to_key(by_length))`, `re.sub(p, fix, text)`, `rows.apply(clean)`.
    The routine passes over its input and calls that function for each item, so a thread caught at this
    line, or in that function, is that pass at work: it ends with its input, as a `for` loop does.
    With `callee`, only a call that passes that function (or a lambda, for `<lambda>`) counts."""
    tree = _parsed(source)
    statement = _statement_at(tree, line) if tree is not None else None
    if statement is None or isinstance(statement, (ast.While, ast.For, ast.AsyncFor)):
        return None
    defined = _functions_defined(tree)
    for call in (n for n in ast.walk(statement) if isinstance(n, ast.Call)):
        for passed in _passed_functions(call, defined):
            name = "<lambda>" if isinstance(passed, ast.Lambda) else getattr(passed, "id", None) or passed.attr
            if callee is None or callee == name:
                return _cut(ast.get_source_segment(source, call) or ast.unparse(call)), name
    return None


def calls_nothing_outside_loops(source: str, line: int, function: str) -> bool:
    """The statement of `source` at `line` calls nothing and no loop of `function` (the frame's own
    function, or the lambda at that line) holds it: a thread caught there in every sample is called
    there again and again by something outside, not turning inside it."""
    tree = _parsed(source)
    if tree is None:
        return False
    if function == "<lambda>":
        bodies = [n.body for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno <= line <= n.end_lineno]
        return len(bodies) == 1 and not any(isinstance(n, ast.Call) for n in ast.walk(bodies[0]))
    statement = _statement_at(tree, line)
    owner = enclosing_function(tree, line)
    if statement is None or owner is None or owner.name != function:
        return False
    if any(isinstance(n, ast.Call) for n in ast.walk(statement)):
        return False
    loop = _loop_in(tree, line)
    return loop is None or loop.lineno < owner.lineno
