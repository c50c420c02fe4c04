"""The wait collector's reading of /proc/PID/task/TID/syscall, on recorded lines of this machine's
architecture (the numbers come from skills/data/syscalls.yaml)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from debug_stuck.probes.collectors.waits import read_syscalls, resolve_waits, syscall_table, wait_from_syscall


def number_of(name: str) -> int:
    numbers, _ = syscall_table()
    found = [n for n, known in numbers.items() if known == name]
    if not found:
        pytest.skip(f"{name} has no number on this architecture in syscalls.yaml")
    return found[0]


def test_a_poll_resumed_after_a_stop_is_still_a_poll_with_its_own_arguments():
    # A debugger's stop (py-spy, gdb) interrupts a poll with a timeout; the kernel resumes it as
    # restart_syscall, and /proc shows that number with the poll's arguments still in the registers
    # (recorded: a huggingface_hub download waiting on its one socket, timeout 86400000 ms).
    line = f"{number_of('restart_syscall')} 0x7ffddbd348c8 0x1 0x5265c00 0x0 0x0 0x0 0x7ffddbd34860 0x7f0a4831126f"
    wait = wait_from_syscall(101, line, "poll_schedule_timeout.constprop.0")
    assert (wait.op, wait.syscall) == ("poll", "poll")
    assert wait.args[:3] == [0x7FFDDBD348C8, 1, 0x5265C00]


def test_a_sleep_resumed_after_a_stop_is_a_sleep():
    line = f"{number_of('restart_syscall')} 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x7f0a"
    wait = wait_from_syscall(101, line, "hrtimer_nanosleep")
    assert wait.op == "sleep" and not wait.args


def test_an_unknown_resumed_call_says_what_the_kernel_says():
    line = f"{number_of('restart_syscall')} 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x7f0a"
    wait = wait_from_syscall(101, line, "some_driver_wait")
    assert wait.op == "unknown" and wait.wchan == "some_driver_wait"


@pytest.mark.parametrize(
    "wchan, op",
    [
        ("futex_do_wait", "futex"),  # Linux 6.x: a gloo rank's recv on its condition variable, no syscall read
        ("futex_wait_queue", "futex"),
        ("do_wait", "wait-child"),
        ("do_wait.part.0", "wait-child"),
        ("kernel_wait4", "wait-child"),
    ],
)
def test_a_wait_read_from_its_wait_channel_alone(wchan, op):
    assert wait_from_syscall(101, "", wchan).op == op


@pytest.mark.parametrize(
    "name, timeout, expected",
    [
        ("epoll_wait", "0xffffffff", -1),  # select.epoll.poll(-1): asyncio with no timer pending
        ("epoll_wait", "0xffffffffffffffff", -1),
        ("epoll_pwait", "0x1388", 5000),
        ("poll", "0xffffffff", -1),
    ],
)
def test_a_poll_or_epoll_wait_keeps_its_timeout(name, timeout, expected):
    args = ["0x3", "0x7ffd0000", "0x1", "0x0"] if name == "poll" else ["0x3", "0x7ffd0000", "0x1", "0x0", "0x0"]
    args.insert(2 if name == "poll" else 3, timeout)
    line = f"{number_of(name)} {' '.join(args[:6])} 0x7ffd 0x7f0a"
    assert wait_from_syscall(101, line, "do_epoll_wait").timeout_ms == expected


@pytest.mark.parametrize(
    "proc_form, ss_form",
    [
        ("127.0.0.1:8080", "127.0.0.1:8080"),
        ("0000:0000:0000:0000:0000:0000:0000:0001:8080", "[::1]:8080"),
        ("10.0.0.2:443", "[::ffff:10.0.0.2]:443"),
        ("fe80:0000:0000:0000:0000:0000:0000:0001:22", "[fe80::1%eth0]:22"),
    ],
)
def test_an_endpoint_reads_the_same_from_proc_net_tcp_and_from_ss(proc_form, ss_form):
    from debug_stuck.probes.collectors.sockets import _endpoint

    assert _endpoint(proc_form) == _endpoint(ss_form) is not None


def test_connections_last_receive_times_are_empty_without_ss(monkeypatch):
    from debug_stuck.probes.collectors import sockets

    monkeypatch.setenv("PATH", "/nonexistent")
    assert sockets.tcp_last_receive() == {}


def test_a_connection_receiving_between_two_readings_is_told_from_one_that_stopped(tmp_path, monkeypatch):
    """Two readings of `ss -tinH` (tcp_info), the gap apart: bytes_received grew on one connection
    and not on the other; lastrcv as the second reading gives it."""
    from debug_stuck.probes.collectors import sockets

    count = tmp_path / "count"
    count.write_text("0")
    fake = tmp_path / "ss"
    fake.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {count}); echo $((n + 1)) > {count}\n"
        'echo "0 0 127.0.0.1:5000 127.0.0.1:8080"\n'
        'echo "\t cubic bytes_sent:$((200 + n * 100)) lastsnd:900 lastrcv:12 bytes_received:$((1000 + n * 65536))"\n'
        'echo "0 0 127.0.0.1:5001 127.0.0.1:8081"\n'
        'echo "\t cubic lastsnd:4000 lastrcv:4000 bytes_received:5000 lastack:4000"\n'
        'echo "0 0 127.0.0.1:5002 127.0.0.1:8082"\n'
        'echo "\t cubic bytes_sent:10 bytes_received:77"\n'
        'echo "0 0 127.0.0.1:5003 127.0.0.1:8083"\n'
        'echo "\t cubic bytes_sent:$((1000 + n * 4096)) lastsnd:20 lastrcv:9000"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    moving, stopped, absent = (
        (("127.0.0.1", 5000), ("127.0.0.1", 8080)),
        (("127.0.0.1", 5001), ("127.0.0.1", 8081)),
        (("127.0.0.1", 1), ("127.0.0.1", 2)),
    )
    # ss leaves out lastrcv when it is 0 (data this very millisecond)
    zero = (("127.0.0.1", 5002), ("127.0.0.1", 8082))
    assert sockets.tcp_last_receive()[zero] == 0
    count.write_text("0")
    found = sockets.tcp_receiving([moving, stopped, absent], gap=0.01)
    assert found == {moving: (12, 65536, 100), stopped: (4000, 0, 0)}
    count.write_text("0")  # an upload to a slow reader: it only sends, and ss prints no bytes_received
    uploading = (("127.0.0.1", 5003), ("127.0.0.1", 8083))
    assert sockets.tcp_receiving([uploading], gap=0.01) == {uploading: (9000, 0, 4096)}
    count.write_text("0")  # only a connection silent for over a second: no second reading, no gap
    assert sockets.tcp_receiving([stopped], gap=60) == {stopped: (4000, 0, 0)}
    assert count.read_text().strip() == "1"


POLL_LOOP = """
import os, select
r, w = os.pipe()
print(r, flush=True)
while True:
    p = select.poll()
    p.register(r, select.POLLIN)
    p.poll(3)
    del p  # its pollfd array is freed here; the objects made next take its memory
    junk = [object() for _ in range(200)]
"""


@pytest.mark.timeout(60)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_poll_loop_that_frees_its_array_between_calls_never_shows_other_data_as_descriptors(session_job):
    """multiprocessing's connection.wait (DataLoader's get every 5 s) makes a new poll array for
    each call: read after the call returned, its memory holds other objects (an object's refcount
    read as fd 1, or a pointer's bits as fd 1798594832). What is shown is the array of a call that
    still sits in poll(), or "returned before ... could be read", never another object."""
    proc = session_job([sys.executable, "-I", "-c", POLL_LOOP], stdout=subprocess.PIPE, text=True)
    fd = int(proc.stdout.readline())
    seen = {"right": 0, "gone": 0, "wrong": []}
    for _ in range(100):
        waits = read_syscalls(proc.pid)
        wait = waits[proc.pid]
        if wait.op != "poll":
            continue
        time.sleep(0.01)  # the call it was in has returned by now, most often
        resolve_waits({proc.pid: waits})
        if wait.error and "returned before the descriptors it watched could be read" in wait.error:
            seen["gone"] += 1
        elif [w["fd"] for w in wait.watched] == [fd]:
            seen["right"] += 1
        else:
            seen["wrong"].append(([w["fd"] for w in wait.watched], wait.error))
    assert seen["wrong"] == [] and seen["right"] > 0, seen


ACCEPT_CLOSED = """
import socket, threading, time
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
t = threading.Thread(target=srv.accept, name="status-server")
t.start()
time.sleep(0.3)
srv.close()  # does not wake the accept() on Linux
print(t.native_id, flush=True)
t.join()
"""


@pytest.mark.timeout(60)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_accept_on_a_descriptor_another_thread_closed_says_the_fd_is_closed(session_job):
    """The thirteenth hunt's j18: a thread in accept() on a listening socket the main thread closed.
    Read from /proc alone (a ptrace stop restarts the call, which then fails with EBADF and ends the
    hang): the fd is no longer in the table, not an unreadable one."""
    proc = session_job([sys.executable, "-I", "-c", ACCEPT_CLOSED], stdout=subprocess.PIPE, text=True)
    tid = int(proc.stdout.readline())
    deadline = time.monotonic() + 20
    while True:
        waits = read_syscalls(proc.pid)
        wait = waits.get(tid)
        if wait is not None and wait.op == "accept":
            break
        assert time.monotonic() < deadline, waits
        time.sleep(0.05)
    resolve_waits({proc.pid: waits})
    assert wait.object is None and wait.error == f"fd {wait.fd} is closed", (wait.fd, wait.error)
