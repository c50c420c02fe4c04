"""Hang: a preprocessing step waits for a child before reading the output it sent into a pipe.

``python subprocess_output.py``. The job exports its tokenizer statistics with a helper program the
way many scripts do::

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    proc.wait()                      # before reading: the bug
    stats = proc.stdout.read()

The child writes 1 MiB; a pipe holds 64 KiB, so the child blocks in its write until someone reads,
and the parent waits in ``wait()`` for the child to exit. The Python docs warn of exactly this
(subprocess, Popen.wait). A diagnosis must not end the deadlock by pausing the child: a pause cuts
its half-done write short and CPython then drops the rest of the output.

READY (``{"pid", "child_pid"}``): once the child has sat in the pipe write, and the parent in its
wait, for 5 consecutive samples.

``python subprocess_output.py reply_short``: request and reply with a decoder child that flushes each
frame, and a trainer that reads a frame four times larger: both wait to read (the sixteenth hunt's j04).

``python subprocess_output.py nested``: the job runs that export as a child (``subprocess.run``), so
the process that waits before reading is its child, and the writer its grandchild.

``python subprocess_output.py background``: the job starts a monitor through a shell script and
captures its output, ``subprocess.run(["sh", "-c", "...; sleep 3600 & ..."], capture_output=True)``.
The shell exits at once, but the ``sleep`` it left running in the background holds the pipe it
inherited as stdout, so ``run()`` waits for an end-of-file that never comes (the ninth hunt's h06).
The ``sleep`` is re-parented to init: no descendant of the job. READY adds ``holder_pid``.

``python subprocess_output.py both_ways``: the job pipes its corpus through a filter child
(``Popen(stdin=PIPE, stdout=PIPE)``) and writes all of it before reading any output: the child
blocks writing its full stdout pipe, the job blocks writing the child's full stdin pipe (the tenth
hunt's j02, whose first fix took the job itself for a background process and said to kill it).

``python subprocess_output.py endless``: the job snapshots the end of its event log for the run report
with ``subprocess.check_output(["tail", "-f", "-n", "5", log])``: ``-f`` follows the file for ever, so
the output never ends (the eleventh hunt's j24, ``top`` without ``-n``, read as a storage stall).
READY adds ``child_pid`` and ``call_line``.

``python subprocess_output.py stderr_full``: ``Popen(cmd, stdout=PIPE, stderr=PIPE)`` and
``proc.stdout.read()`` first: the child writes 1 MiB of warnings to stderr before its result, blocks
on the full stderr pipe, and never closes stdout (the twelfth hunt's j04, "break the cycle").

``python subprocess_output.py reply_buffered``: request and reply with a Python child over its stdin
and stdout; the child answers with ``print`` into a pipe (block-buffered) and waits for the next
request, while the job waits in ``readline()`` for the answer (the twelfth hunt's j15).

``python subprocess_output.py asyncio_wait``: the same export under asyncio,
``proc = await asyncio.create_subprocess_exec(..., stdout=PIPE)`` then ``await proc.wait()`` before
reading: asyncio stops reading the pipe once its stream buffer is full, the child blocks in its write,
and the loop idles in epoll while asyncio's child watcher thread waits for the child to exit (the
thirteenth hunt's j04: the chain stopped at the loop, "drain the pipe to a file").
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Callable

import _common

HELPER = "import sys; sys.stdout.write('token,count\\n' * 100000)"  # 1.1 MB of statistics


def main() -> None:
    print("preprocessing: exporting tokenizer statistics", flush=True)
    proc = subprocess.Popen([sys.executable, "-I", "-c", HELPER], stdout=subprocess.PIPE)
    main_thread = threading.main_thread()

    def both_stuck() -> bool:
        writing = _common.blocked_in(proc.pid, None, ("pipe_write", "anon_pipe_write"), ("write",))
        waiting = "wait" in _common.stack_functions(main_thread.ident)
        return (
            writing
            and waiting
            and _common.sleeping_steadily(proc.pid)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
        )

    _common.ready_when(both_stuck, lambda: {"child_pid": proc.pid, "prep_pid": os.getpid()})
    proc.wait()  # the child cannot exit before its output is read
    stats = proc.stdout.read()
    print(f"read {len(stats)} bytes of statistics", flush=True)


MONITOR = "echo starting monitor; sleep 3600 & echo monitor started"


def _session_processes() -> list:
    """(pid, ppid, name, state) of every process in this process's session, from /proc/PID/stat."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == os.getsid(0):
            found.append((int(name), int(fields[1]), comm, fields[0]))
    return found


def background() -> None:
    main_thread = threading.main_thread()
    holder = {}

    def left_behind() -> bool:
        session = _session_processes()
        shells = [pid for pid, ppid, _, state in session if ppid == os.getpid() and state == "Z"]
        waiting = "_communicate" in _common.stack_functions(main_thread.ident)
        sleeps = [pid for pid, ppid, comm, _ in session if comm == "sleep" and ppid != os.getpid()]
        if shells and sleeps and waiting and _common.sleeping_steadily(os.getpid(), main_thread.native_id):
            holder.update(child_pid=shells[0], holder_pid=sleeps[0])
            return True
        return False

    _common.ready_when(left_behind, lambda: holder)
    print("launching monitor", flush=True)
    result = subprocess.run(["sh", "-c", MONITOR], capture_output=True, text=True)  # waits for EOF for ever
    print(result.stdout, flush=True)


FILTER = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line.lower())\n    sys.stdout.flush()"


def both_ways() -> None:
    corpus = "".join(f"Sample Line Number {i} For The Tokenizer Corpus\n" for i in range(400_000)).encode()
    proc = subprocess.Popen([sys.executable, "-I", "-c", FILTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    main_thread = threading.main_thread()

    def both_stuck() -> bool:
        child = _common.blocked_in(proc.pid, None, ("pipe_write", "anon_pipe_write"), ("write",))
        parent = _common.blocked_in(os.getpid(), main_thread.native_id, ("pipe_write", "anon_pipe_write"), ("write",))
        return child and parent

    _common.ready_when(both_stuck, lambda: {"child_pid": proc.pid})
    print("normalising the corpus", flush=True)
    proc.stdin.write(corpus)  # the bug: everything written before any output is read
    proc.stdin.close()
    print(f"normalised {len(proc.stdout.read())} bytes", flush=True)


def endless() -> None:
    import inspect

    events = _common.workdir() / "events.log"
    events.write_text("".join(f"event {i}\n" for i in range(20)))
    main_thread = threading.main_thread()

    def follows() -> bool:
        import psutil

        children = psutil.Process().children()
        return (
            bool(children)
            and "communicate" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
            and _common.sleeping_steadily(children[0].pid)
        )

    def info() -> dict:
        import psutil

        source, first = inspect.getsourcelines(endless)
        line = first + next(i for i, text in enumerate(source) if text.strip().startswith("tail = "))
        return {"child_pid": psutil.Process().children()[0].pid, "call_line": line}

    _common.ready_when(follows, info)
    tail = subprocess.check_output(["tail", "-f", "-n", "5", str(events)], text=True)  # the bug: -f never ends
    print(f"last events: {tail!r}", flush=True)


NOISY = "import sys; sys.stderr.write('warning: slow path\\n' * 60000); print('mean=0.5 std=0.2')"
ANSWERS = "import sys\nfor line in sys.stdin:\n    print(len(line.split()))  # buffered: a pipe, not a terminal"


def _both_sleep(proc) -> Callable[[], bool]:
    main_thread = threading.main_thread()
    return lambda: _common.sleeping_steadily(proc.pid) and _common.sleeping_steadily(os.getpid(), main_thread.native_id)


def stderr_full() -> None:
    proc = subprocess.Popen([sys.executable, "-I", "-c", NOISY], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    full = lambda: _common.blocked_in(proc.pid, None, ("pipe_write", "anon_pipe_write"), ("write",))  # noqa: E731
    both = _both_sleep(proc)
    _common.ready_when(lambda: full() and both(), lambda: {"child_pid": proc.pid})
    print("computing normaliser stats in a subprocess", flush=True)
    out = proc.stdout.read()  # the bug: stderr fills first, and stdout never ends
    proc.stderr.read()
    print(f"stats {out!r}", flush=True)


def reply_buffered() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", ANSWERS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    _common.ready_when(_both_sleep(proc), lambda: {"child_pid": proc.pid})
    for text in ["hello world", "a b c d"] * 10:
        proc.stdin.write(text + "\n")
        proc.stdin.flush()
        count = int(proc.stdout.readline())  # the child's answer sits in its stdout buffer
        print(f"{text!r}: {count} tokens", flush=True)


DECODER = """import sys
out = sys.stdout.buffer
for line in sys.stdin:
    frame = bytes(3 * 112 * 112)  # a 112x112 frame: the trainer reads 224x224
    out.write(frame)
    out.flush()
"""


def reply_short() -> None:
    """A decoder child sends each frame and flushes it; the trainer reads a frame of another size."""
    decoder = _common.workdir() / "decoder.py"
    decoder.write_text(DECODER)
    proc = subprocess.Popen([sys.executable, "-I", str(decoder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    _common.ready_when(_both_sleep(proc), lambda: {"child_pid": proc.pid})
    for step in range(10):
        proc.stdin.write(b"next\n")
        proc.stdin.flush()
        frame = proc.stdout.read(3 * 224 * 224)  # more than one frame: waits for the next, never asked for
        print(f"step {step}: {len(frame)} bytes", flush=True)


def asyncio_wait() -> None:
    import asyncio

    async def export() -> bytes:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-I", "-c", HELPER, stdout=subprocess.PIPE)
        writing = lambda: _common.blocked_in(proc.pid, None, ("pipe_write", "anon_pipe_write"), ("write",))  # noqa: E731
        _common.ready_when(
            lambda: writing() and _common.sleeping_steadily(proc.pid) and _common.sleeping_steadily(os.getpid()),
            lambda: {"child_pid": proc.pid},
        )
        await proc.wait()  # before reading: asyncio stops reading a full stream buffer
        return await proc.stdout.read()

    print("preprocessing: exporting tokenizer statistics", flush=True)
    print(f"read {len(asyncio.run(export()))} bytes", flush=True)


def nested() -> None:
    """The same export two levels down: the trainer waits in subprocess.run for a prep script, which
    waits for its helper before reading its output (the sixteenth hunt's j22)."""
    subprocess.run([sys.executable, __file__])


if __name__ == "__main__":
    scenarios = {"background": background, "both_ways": both_ways, "endless": endless, "asyncio_wait": asyncio_wait}
    scenarios["nested"] = nested
    scenarios["reply_short"] = reply_short
    scenarios.update(stderr_full=stderr_full, reply_buffered=reply_buffered)
    scenarios.get(sys.argv[1] if sys.argv[1:] else "", main)()
