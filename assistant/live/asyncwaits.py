"""What an idle asyncio loop's coroutines await, read from the job's source (never run): an
asyncio.Event the code awaits but never sets, an asyncio.Queue it awaits but never fills.

    self.ready = asyncio.Event()      # created here...
    await pf.ready.wait()             # ...awaited here, and no `.ready.set()` anywhere in the file

A suspended coroutine is on no thread's stack, so the line that awaits is not in the snapshot: the
file that starts the loop is read instead. Only a primitive the same file creates counts, and only
when exactly one awaited primitive has no completing call anywhere in that file (another module could
hold the call that completes it, which a file the job does not run from is not read for)."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from debug_stuck.live.loops import enclosing_function, own_frame_index
from debug_stuck.live.selflock import attribute_calls, frame_source, named_calls, parse_source

# awaited method -> (the asyncio class that has it, the calls that complete the await): CPython 3.11
# Lib/asyncio/locks.py Event.wait ("Block until the internal flag is true"; set() sets it) and
# Lib/asyncio/queues.py Queue.get ("If queue is empty, wait until an item is available"; put, put_nowait)
COMPLETES = {"wait": ("Event", ("set",)), "get": ("Queue", ("put", "put_nowait"))}


def _last(receiver: str) -> str:
    return receiver.rsplit(".", 1)[-1]


def _created(tree: ast.AST) -> Dict[str, Tuple[str, int]]:
    """name (its last part) -> (asyncio class, line) for `x = asyncio.Event()` and
    `self.x = asyncio.Queue(...)` (Event, Queue, LifoQueue, PriorityQueue; Lock for lock_order)."""
    made: Dict[str, Tuple[str, int]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or not isinstance(node.value, ast.Call):
            continue
        func = ast.unparse(node.value.func)
        kind = func.rsplit(".", 1)[-1]
        if not (func.startswith("asyncio.") or func in ("Event", "Queue")):
            continue
        kind = "Queue" if kind.endswith("Queue") else kind
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, (ast.Name, ast.Attribute)):
                made[_last(ast.unparse(target))] = (kind, node.lineno)
    return made


def _awaits(tree: ast.AST) -> List[Tuple[ast.Call, str, str]]:
    """(call, receiver, the coroutine's name) for each `await x.wait()` / `await x.get()` inside an
    async def."""
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Await) and isinstance(node.value, ast.Call):
                for call, receiver in attribute_calls(node.value, tuple(COMPLETES)):
                    if call is node.value:
                        found.append((call, receiver, function.name))
    return found


def _loop_file(pid: int, frames):
    """(the loop thread's innermost frame of the job's own code, that file parsed), or (None, None)."""
    index = own_frame_index(frames)
    if index is None:
        return None, None
    return frames[index], parse_source(frame_source(frames[index], pid))


def never_completed(pid: int, frames) -> Optional[Dict[str, str]]:
    """The one await in the loop-starting file on an asyncio Event or Queue that the file creates and
    never completes: {awaited, awaited_at, primitive, created_at, completes}. None when there is not
    exactly one."""
    frame, tree = _loop_file(pid, frames)
    if tree is None:
        return None
    made = _created(tree)
    unmet = []
    for call, receiver, coroutine in _awaits(tree):
        kind, completers = COMPLETES[call.func.attr]
        name = _last(receiver)
        if made.get(name, ("", 0))[0] != kind:
            continue
        if any(_last(other) == name for _, other in attribute_calls(tree, completers)):
            continue
        unmet.append((call, receiver, coroutine, kind, completers))
    if len({receiver for _, receiver, *_ in unmet}) != 1:
        return None
    call, receiver, coroutine, kind, completers = unmet[0]
    return {
        "awaited": f"{receiver}.{call.func.attr}()",
        "awaited_at": f"{coroutine} ({frame.file}:{call.lineno})",
        "primitive": f"asyncio.{kind}",
        "created_at": f"{frame.file}:{made[_last(receiver)][1]}",
        "completes": f"{_last(receiver)}.{completers[0]}()",
    }


def _nested_takes(tree: ast.AST) -> List[Tuple[str, str, str, int]]:
    """(outer, inner, coroutine, line of the inner) for each `async with inner:` inside the body of an
    `async with outer:` in an async def (names by their last part)."""
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.AsyncFunctionDef):
            continue
        for outer in ast.walk(function):
            if not isinstance(outer, ast.AsyncWith):
                continue
            held = [_last(ast.unparse(item.context_expr)) for item in outer.items]
            for node in outer.body:
                for inner in ast.walk(node):
                    if isinstance(inner, ast.AsyncWith):
                        for item in inner.items:
                            found += [
                                (h, _last(ast.unparse(item.context_expr)), function.name, inner.lineno) for h in held
                            ]
    return found


def lock_order(pid: int, frames) -> Optional[Dict[str, str]]:
    """Two asyncio.Locks the loop-starting file makes, taken nested in opposite orders by two
    coroutines (`async with a:` around `async with b:` in one, b around a in the other): each task can
    hold one and wait for the other. {async_locks, lock_orders}; None when the file shows no such pair."""
    frame, tree = _loop_file(pid, frames)
    if tree is None:
        return None
    locks = {name for name, (kind, _) in _created(tree).items() if kind == "Lock"}  # asyncio.Lock()
    takes = [t for t in _nested_takes(tree) if t[0] in locks and t[1] in locks and t[0] != t[1]]
    for outer, inner, coroutine, line in takes:
        other = next((t for t in takes if (t[0], t[1]) == (inner, outer) and t[2] != coroutine), None)
        if other is not None:
            return {
                "async_locks": f"{outer} and {inner}",
                "lock_orders": (
                    f"{coroutine} takes {outer} then {inner} ({frame.file}:{line}); "
                    f"{other[2]} takes {inner} then {outer} ({frame.file}:{other[3]})"
                ),
            }
    return None


def barrier_parties(pid: int, frames) -> Optional[Dict[str, str]]:
    """The one asyncio.Barrier the loop-starting file makes and awaits (`await b.wait()` or `async with
    b:`), when the loop has no task left to run: a Barrier wakes its tasks only once `parties` of them
    wait (CPython 3.11 Lib/asyncio/locks.py Barrier.wait: "When the specified number of tasks have
    started waiting, they are all simultaneously awoken"), so fewer tasks than that wait for ever. The
    number of tasks is not read (it is often computed); {barrier_parties, barrier_at, barrier_waits}."""
    frame, tree = _loop_file(pid, frames)
    if tree is None:
        return None
    made = [(name, line) for name, (kind, line) in _created(tree).items() if kind == "Barrier"]
    if len(made) != 1:
        return None
    name, line = made[0]
    waits = [
        (coroutine, call.lineno)
        for call, receiver, coroutine in _awaits(tree)
        if call.func.attr == "wait" and _last(receiver) == name
    ]
    waits += [
        (function.name, node.lineno)
        for function in ast.walk(tree)
        if isinstance(function, ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.AsyncWith) and any(_last(ast.unparse(i.context_expr)) == name for i in node.items)
    ]
    creation = next(
        (n.value for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.lineno == line),
        None,
    )
    if not waits or not isinstance(creation, ast.Call):
        return None
    parties = (
        ast.unparse(creation.args[0])
        if creation.args
        else next((ast.unparse(k.value) for k in creation.keywords if k.arg == "parties"), "?")
    )
    coroutine, at = waits[0]
    return {
        "barrier_parties": f"{ast.unparse(creation.func)}({parties})",
        "barrier_at": f"{frame.file}:{line}",
        "barrier_waits": f"{coroutine} ({frame.file}:{at})",
    }


def _thread_targets(tree: ast.AST) -> Dict[str, int]:
    """name -> line of each function the file hands to another thread: `Thread(target=f)`,
    `loop.run_in_executor(executor, f, ...)`, `executor.submit(f, ...)`, `asyncio.to_thread(f, ...)`."""
    found: Dict[str, int] = {}
    for call in named_calls(tree, ("Thread", "run_in_executor", "submit", "to_thread")):
        name = getattr(call.func, "attr", None) or getattr(call.func, "id", None)
        if name == "Thread":
            target = next((k.value for k in call.keywords if k.arg == "target"), None)
        elif name == "run_in_executor":
            target = call.args[1] if len(call.args) > 1 else None
        else:
            target = call.args[0] if call.args else None
        if isinstance(target, (ast.Name, ast.Attribute)):
            found[_last(ast.unparse(target))] = call.lineno
    return found


def set_from_thread(pid: int, frames) -> Optional[Dict[str, str]]:
    """The one asyncio Event the loop-starting file makes and awaits whose every set() runs in a
    function the file hands to another thread: asyncio's primitives are not thread-safe (Python docs,
    asyncio Synchronization Primitives: "not thread-safe, therefore they should not be used for OS
    thread synchronization"); a set() from another thread marks the Event but never wakes the loop's
    selector, so the await never returns. {awaited, awaited_at, primitive, created_at, set_in_thread}."""
    frame, tree = _loop_file(pid, frames)
    if tree is None:
        return None
    made = _created(tree)
    targets = _thread_targets(tree)
    found = []
    for call, receiver, coroutine in _awaits(tree):
        name = _last(receiver)
        if call.func.attr != "wait" or made.get(name, ("", 0))[0] != "Event":
            continue
        sets = [c for c, other in attribute_calls(tree, ("set",)) if _last(other) == name]
        where = [enclosing_function(tree, c.lineno) for c in sets]
        if sets and all(isinstance(f, ast.FunctionDef) and f.name in targets for f in where):
            found.append((call, receiver, coroutine, sets[0], where[0]))
    if len({receiver for _, receiver, *_ in found}) != 1:
        return None
    call, receiver, coroutine, setter, function = found[0]
    return {
        "awaited": f"{receiver}.wait()",
        "awaited_at": f"{coroutine} ({frame.file}:{call.lineno})",
        "primitive": "asyncio.Event",
        "created_at": f"{frame.file}:{made[_last(receiver)][1]}",
        "set_in_thread": (
            f"{function.name} ({frame.file}:{setter.lineno}), which the file runs in another thread "
            f"({frame.file}:{targets[function.name]})"
        ),
    }


def lock_across_await(pid: int, frames) -> Optional[Dict[str, str]]:
    """The threading lock a coroutine holds across an await, when the loop thread waits for it at a
    `with` of the job's own code: `with state_lock:` around `await ...` in one coroutine suspends that
    coroutine with the lock held, and another coroutine's `with state_lock:` then blocks the loop's one
    thread, so the holder is never resumed to release it (Python docs, asyncio Synchronization
    Primitives: asyncio.Lock, "async with lock", is the lock for coroutines). {lock, held_across_await}."""
    frame, tree = _loop_file(pid, frames)
    if tree is None or not isinstance(frame.line, int):
        return None
    waiting = [
        _last(ast.unparse(item.context_expr))
        for node in ast.walk(tree)
        if isinstance(node, ast.With) and node.lineno == frame.line
        for item in node.items
    ]
    if len(waiting) != 1:
        return None
    for function in ast.walk(tree):
        if not isinstance(function, ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if not isinstance(node, ast.With) or node.lineno == frame.line:
                continue
            if not any(_last(ast.unparse(item.context_expr)) == waiting[0] for item in node.items):
                continue
            held = next((a for part in node.body for a in ast.walk(part) if isinstance(a, ast.Await)), None)
            if held is not None:
                return {
                    "lock": waiting[0],
                    "held_across_await": (
                        f"{function.name} (its `with` at {frame.file}:{node.lineno}, an await at line {held.lineno})"
                    ),
                }
    return None


def _skips_between(loop: ast.AST, start: int, end: int) -> Optional[int]:
    """The line of a `continue` (or `return`) of this loop's own body between two lines, outside any
    `try` whose `finally` would still run the call at `end`."""
    for node in ast.walk(loop):
        if isinstance(node, ast.Try) and node.finalbody:
            return None  # a task_done in a finally runs on every path: no claim
    for node in ast.walk(loop):
        if isinstance(node, (ast.Continue, ast.Return)) and start < node.lineno < end:
            return node.lineno
    return None


def task_done_skipped(pid: int, frames) -> Optional[Dict[str, str]]:
    """An asyncio Queue the loop-starting file makes and awaits `.join()` on, whose consumer coroutine
    takes an item (`await q.get()`) and then leaves the iteration (`continue`, `return`) before its
    `q.task_done()`: join waits until task_done has been called once per item (CPython 3.11
    Lib/asyncio/queues.py Queue.join), so one skipped item keeps it waiting. {queue, skip_at,
    task_done_at, joined_at}; None otherwise."""
    frame, tree = _loop_file(pid, frames)
    if tree is None:
        return None
    queues = {name for name, (kind, _) in _created(tree).items() if kind == "Queue"}
    joined = {_last(r): call.lineno for call, r in attribute_calls(tree, ("join",)) if _last(r) in queues}
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef)):
        for loop in (n for n in ast.walk(function) if isinstance(n, (ast.While, ast.For))):
            gets = [(c.lineno, _last(r)) for c, r in attribute_calls(loop, ("get",)) if _last(r) in joined]
            dones = {_last(r): c.lineno for c, r in attribute_calls(loop, ("task_done",))}
            for line, name in gets:
                done = dones.get(name)
                skip = _skips_between(loop, line, done) if done is not None and done > line else None
                if skip is not None:
                    return {
                        "queue": name,
                        "skip_at": f"{function.name} ({frame.file}:{skip})",
                        "task_done_at": f"{frame.file}:{done}",
                        "joined_at": f"{frame.file}:{joined[name]}",
                    }
    return None


def permits_leaked_async(pid: int, frames) -> Optional[Dict[str, str]]:
    """An asyncio Semaphore the loop-starting file makes, taken in a coroutine with `await
    sem.acquire()` and given back by a later `sem.release()` in the same coroutine, with a `return`
    or `continue` between them and no `finally`: each task that leaves that way keeps a permit, and
    once all are kept every task waits in acquire (CPython 3.11 Lib/asyncio/locks.py Semaphore).
    {semaphore, leak_at, acquired_at}; None otherwise."""
    frame, tree = _loop_file(pid, frames)
    if tree is None:
        return None
    semaphores = {name for name, (kind, _) in _created(tree).items() if kind in ("Semaphore", "BoundedSemaphore")}
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef)):
        taken = [(c.lineno, _last(r)) for c, r in attribute_calls(function, ("acquire",)) if _last(r) in semaphores]
        given = {}
        for call, receiver in attribute_calls(function, ("release",)):
            given.setdefault(_last(receiver), []).append(call.lineno)
        for line, name in taken:
            after = [g for g in given.get(name, []) if g > line]
            leak = _skips_between(function, line, min(after)) if after else None
            if leak is not None:
                return {
                    "semaphore": name,
                    "leak_at": f"{function.name} ({frame.file}:{leak})",
                    "acquired_at": f"{frame.file}:{line}",
                }
    return None
