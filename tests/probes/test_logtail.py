import os
import threading
import time

import pytest

from debug_stuck.core.logtext import parse_progress
from debug_stuck.probes.collectors.logtail import read_log_tail


def write(tmp_path, name, data, mode="w"):
    path = tmp_path / name
    with open(path, mode) as fh:
        fh.write(data)
    return str(path)


def test_reads_only_the_tail(tmp_path):
    body = "".join(f"step {i} loss 0.5\n" for i in range(200000))  # ~4 MB
    path = write(tmp_path, "big.log", body)
    tail = read_log_tail(path, max_bytes=64 * 1024)
    assert tail.ok
    assert tail.size > 3_000_000
    assert tail.size - tail.start_offset <= 64 * 1024
    assert tail.lines[-1] == "step 199999 loss 0.5"
    assert tail.lines[0].startswith("step ")  # the cut first line was dropped
    assert tail.progress.last_step == 199999
    assert not tail.whole_file


def test_tqdm_carriage_returns_and_rate(tmp_path):
    redraws = "\r".join(f"steps:  {i}%|##   | {i}/100 [00:{i:02d}<01:00,  2.50it/s, loss=0.1]" for i in range(1, 40))
    path = write(tmp_path, "tqdm.log", "starting\n" + redraws + "\n")
    tail = read_log_tail(path)
    assert tail.progress.last_step == 39
    assert tail.progress.total_steps == 100
    assert tail.progress.seconds_per_step == pytest.approx(0.4)
    # every redraw shares the physical line number 2
    assert set(tail.line_numbers[1:]) == {2}


def test_step_interval_from_timestamps():
    lines = [f"2025-11-15 02:{m:02d}:00 INFO step {m * 10} loss 1.0" for m in range(0, 6)]
    prog = parse_progress(lines)
    assert prog.last_step == 50
    assert prog.seconds_per_step == pytest.approx(6.0)
    assert prog.last_timestamp == "2025-11-15 02:05:00"


def test_epoch_and_clock_timestamp():
    prog = parse_progress(["[13:23:10] Starting Epoch 4/50", "Batch 4,886 / 41,163 done"])
    assert (prog.last_epoch, prog.total_epochs) == (4, 50)
    assert prog.last_timestamp == "13:23:10"
    assert (prog.last_step, prog.total_steps) == (4886, 41163)


def test_binary_file_is_an_error_not_a_crash(tmp_path):
    path = tmp_path / "ckpt.pt"
    path.write_bytes(os.urandom(200_000))
    tail = read_log_tail(str(path))
    assert not tail.ok
    assert "binary" in tail.error and str(path) in tail.error


def test_sparse_2gb_log_reads_the_text_at_its_end(tmp_path):
    path = tmp_path / "sparse.log"
    with open(path, "wb") as fh:
        fh.truncate(2 * 1024**3)
        fh.seek(0, os.SEEK_END)
        fh.write(b"step 77 loss 0.3\nRuntimeError: DataLoader timed out after 60 seconds\n")
    started = time.monotonic()
    tail = read_log_tail(str(path))
    assert time.monotonic() - started < 5
    assert tail.ok, tail.error
    assert tail.lines[-1].startswith("RuntimeError: DataLoader timed out")
    assert tail.progress.last_step == 77


def test_all_nul_tail_is_reported(tmp_path):
    path = tmp_path / "holes.log"
    with open(path, "wb") as fh:
        fh.truncate(1024**2)
    tail = read_log_tail(str(path))
    assert not tail.ok and "no text" in tail.error


def test_utf16_and_latin1(tmp_path):
    p16 = tmp_path / "win.log"
    p16.write_bytes("step 5 ok\nstep 6 ok\n".encode("utf-16"))
    tail = read_log_tail(str(p16))
    assert tail.ok and tail.encoding.startswith("utf-16") and tail.progress.last_step == 6
    p1 = tmp_path / "latin.log"
    p1.write_bytes("caf\xe9 step 9\n".encode("latin-1"))
    tail = read_log_tail(str(p1))
    assert tail.ok and tail.progress.last_step == 9


def test_missing_directory_and_fifo_never_block(tmp_path):
    assert "cannot read" in read_log_tail(str(tmp_path / "nope.log")).error
    assert "directory" in read_log_tail(str(tmp_path)).error
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("tail", read_log_tail(str(fifo))), daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "reading a FIFO blocked"
    assert "not a regular file" in result["tail"].error


def test_read_timeout_is_reported(tmp_path, monkeypatch):
    import debug_stuck.probes.collectors.logtail as logtail

    def hang(path, max_bytes):
        time.sleep(10)

    monkeypatch.setattr(logtail, "_read_raw", hang)
    started = time.monotonic()
    tail = read_log_tail(str(tmp_path / "x.log"), timeout=0.5)
    assert time.monotonic() - started < 3
    assert "did not finish within 0.5 s" in tail.error


def test_ansi_colours_are_stripped(tmp_path):
    path = write(tmp_path, "colour.log", "\x1b[32mINFO\x1b[0m step 12 loss 1\n")
    tail = read_log_tail(path)
    assert tail.lines == ["INFO step 12 loss 1"]
