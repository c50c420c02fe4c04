"""An idle asyncio loop's await on an Event or a Queue that the job's file never completes
(live.asyncwaits), read from real source files: the frames are the loop thread's as py-spy gives them."""

from __future__ import annotations

import os
import textwrap

from debug_stuck.live.asyncwaits import never_completed
from debug_stuck.probes.collectors.stacks import Frame

PREFETCH = """
    import asyncio

    class Prefetcher:
        def __init__(self):
            self.ready = asyncio.Event()
            self.batches = []

        async def fill(self, n):
            for i in range(n):
                await asyncio.sleep(0.01)
                self.batches.append(i)
            {completion}

    async def main():
        pf = Prefetcher()
        asyncio.get_running_loop().create_task(pf.fill(20))
        await pf.ready.wait()

    asyncio.run(main())
"""

QUEUE = """
    import asyncio

    async def produce(results, out):
        for i in range(4):
            out.append(i)  # meant: await results.put(i)

    async def main():
        results = asyncio.Queue(maxsize=8)
        asyncio.create_task(produce(results, []))
        while True:
            item = await results.get()
"""


def _loop_frames(path: str, line: int) -> list:
    return [
        Frame("EpollSelector.select", "selectors.py", 468, path="/usr/lib/python3.11/selectors.py"),
        Frame(
            "BaseEventLoop._run_once", "asyncio/base_events.py", 1884, path="/usr/lib/python3.11/asyncio/base_events.py"
        ),
        Frame("run", "asyncio/runners.py", 190, path="/usr/lib/python3.11/asyncio/runners.py"),
        Frame("<module>", os.path.basename(path), line, path=path),
    ]


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(text))
    return str(path)


def _line_of(path: str, text: str) -> int:
    return next(i for i, line in enumerate(open(path).read().splitlines(), 1) if line.strip() == text)


def _run_line(path: str) -> int:
    return _line_of(path, "asyncio.run(main())")


def test_an_event_the_file_never_sets_is_named_with_its_await(tmp_path):
    path = _write(tmp_path, PREFETCH.replace("{completion}", "# forgot self.ready.set()"))
    found = never_completed(os.getpid(), _loop_frames(path, _run_line(path)))
    assert found is not None
    assert found["awaited"] == "pf.ready.wait()" and found["completes"] == "ready.set()", found
    awaited, created = _line_of(path, "await pf.ready.wait()"), _line_of(path, "self.ready = asyncio.Event()")
    assert found["awaited_at"] == f"main (train.py:{awaited})" and found["created_at"] == f"train.py:{created}", found
    assert found["primitive"] == "asyncio.Event", found


def test_an_event_the_file_sets_is_not_named(tmp_path):
    path = _write(tmp_path, PREFETCH.replace("{completion}", "self.ready.set()"))
    assert never_completed(os.getpid(), _loop_frames(path, _run_line(path))) is None


def test_a_queue_nothing_puts_on_is_named(tmp_path):
    path = _write(tmp_path, QUEUE)
    found = never_completed(os.getpid(), _loop_frames(path, _line_of(path, "item = await results.get()")))
    assert found is not None and found["awaited"] == "results.get()", found
    assert found["completes"] == "results.put()" and found["primitive"] == "asyncio.Queue", found


def test_two_awaits_left_open_name_neither(tmp_path):
    """Which of two never-completed awaits the loop is stuck in is not in the source: no guess."""
    text = PREFETCH.replace("{completion}", "# forgot self.ready.set()").replace(
        "await pf.ready.wait()", "await pf.ready.wait()\n        await done.wait()"
    )
    text = text.replace("    pf = Prefetcher()", "    pf = Prefetcher()\n        done = asyncio.Event()")
    path = _write(tmp_path, text)
    assert never_completed(os.getpid(), _loop_frames(path, _run_line(path))) is None


def test_a_primitive_made_in_another_module_is_not_judged(tmp_path):
    """An Event the file does not make could be set by the module that made it."""
    text = PREFETCH.replace("{completion}", "").replace("asyncio.Event()", "shared.make_flag()")
    path = _write(tmp_path, text)
    assert never_completed(os.getpid(), _loop_frames(path, _run_line(path))) is None


LOCKS = """
    import asyncio

    params_lock = asyncio.Lock()
    stats_lock = asyncio.Lock()

    async def sync_weights():
        async with params_lock:
            await asyncio.sleep(0.05)
            async with stats_lock:
                pass

    async def log_stats():
        async with {first}:
            await asyncio.sleep(0.05)
            async with {second}:
                pass

    async def main():
        await asyncio.gather(sync_weights(), log_stats())

    asyncio.run(main())
"""


def test_two_asyncio_locks_nested_in_opposite_orders_are_named_with_both_orders(tmp_path):
    """The thirteenth hunt's j03: "no task is left", neither the tasks nor the locks named."""
    from debug_stuck.live.asyncwaits import lock_order

    path = _write(tmp_path, LOCKS.format(first="stats_lock", second="params_lock"))
    found = lock_order(os.getpid(), _loop_frames(path, _run_line(path)))
    assert found is not None and found["async_locks"] == "params_lock and stats_lock", found
    assert found["lock_orders"].startswith("sync_weights takes params_lock then stats_lock (train.py:10); "), found
    assert found["lock_orders"].endswith("log_stats takes stats_lock then params_lock (train.py:16)"), found
    same = _write(tmp_path, LOCKS.format(first="params_lock", second="stats_lock"))
    assert lock_order(os.getpid(), _loop_frames(same, _run_line(same))) is None


BARRIER = """
    import asyncio

    async def load(name, barrier):
        await asyncio.sleep(0.01)
        {wait}

    async def main():
        barrier = asyncio.Barrier({parties})
        {second}
        await asyncio.gather(*(load(f, barrier) for f in FILES))

    asyncio.run(main())
"""


def test_an_asyncio_barrier_the_tasks_wait_in_is_named_with_its_parties_as_written(tmp_path):
    """The thirteenth hunt's j21: the parties as the source writes them, never the number of tasks (that
    is computed: gather over a list), through `await b.wait()` or `async with b:`; two barriers, no guess."""
    from debug_stuck.live.asyncwaits import barrier_parties

    def found(**parts):
        text = BARRIER.format(**{"wait": "await barrier.wait()", "parties": "EXPECTED", "second": "", **parts})
        path = _write(tmp_path, text)
        return barrier_parties(os.getpid(), _loop_frames(path, _run_line(path)))

    assert found() == {
        "barrier_parties": "asyncio.Barrier(EXPECTED)",
        "barrier_at": "train.py:9",
        "barrier_waits": "load (train.py:6)",
    }
    assert found(wait="async with barrier:\n            pass", parties="parties=3")["barrier_parties"] == (
        "asyncio.Barrier(3)"
    )
    assert found(second="other = asyncio.Barrier(2)") is None
    assert found(wait="pass") is None  # made, never waited in


THREAD_SET = """
    import asyncio, threading

    async def main():
        ready = asyncio.Event()

        def loader():
            ready.set()

        {start}
        await ready.wait()

    asyncio.run(main())
"""


def test_an_asyncio_event_set_only_in_a_thread_target_is_named(tmp_path):
    """The fourteenth hunt's j08: Thread(target=loader), run_in_executor(None, loader) or to_thread:
    the only set() runs in another thread. A set() the loop's own code calls is not this."""
    from debug_stuck.live.asyncwaits import set_from_thread

    def found(start):
        path = _write(tmp_path, THREAD_SET.format(start=start))
        return set_from_thread(os.getpid(), _loop_frames(path, _run_line(path)))

    thread = found("threading.Thread(target=loader).start()")
    assert thread is not None and thread["awaited"] == "ready.wait()", thread
    assert thread["set_in_thread"] == "loader (train.py:8), which the file runs in another thread (train.py:10)"
    assert found("asyncio.get_running_loop().run_in_executor(None, loader)") is not None
    assert found("asyncio.to_thread(loader)") is not None
    assert found("loader()") is None  # the loop's own thread sets it
