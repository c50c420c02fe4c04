"""Calibration: a tie between the first two causes is stated, with the one question or probe that
would break it; an answer that separates them breaks it."""

from __future__ import annotations


def test_a_tie_names_the_question_that_breaks_it(cli_json):
    report = cli_json("--answer", "phase=start")
    tie = report["verdict"]["tie"]
    assert tie["causes"] == ["nccl-init", "rendezvous"]
    assert tie["breaker"].startswith("answer stuck_at (What is the last thing the job printed")
    share = report["diagnoses"][0]["confidence"]
    assert report["diagnoses"][1]["confidence"] == share  # a tie: the two share the first place
    assert f"nccl-init and rendezvous are tied at {share:.0%}: answer stuck_at" in report["verdict"]["summary"]

    broken = cli_json("--answer", "phase=start", "--answer", "stuck_at=process-group")
    assert "tie" not in broken["verdict"]
    assert [d["cause"] for d in broken["diagnoses"][:2]] == ["nccl-init", "rendezvous"]
    assert broken["diagnoses"][0]["confidence"] > broken["diagnoses"][1]["confidence"]


def test_answers_alone_never_make_a_sure_verdict(cli_json):
    """Every answer that points one way, and no evidence of the job: still "too little to tell"."""
    report = cli_json(
        "--answer", "phase=mid-run", "--answer", "step=same-step", "--answer", "event=none",
        "--answer", "gpu=idle", "--answer", "cpu=idle", "--answer", "platform=cuda",
    )  # fmt: skip
    first = report["diagnoses"][0]
    assert all(e["source"] == "answer" for e in first["evidence"]), first
    assert first["confidence"] < 0.5, first
    assert report["verdict"]["summary"].startswith("Too little to be sure"), report["verdict"]["summary"]


# torch 2.13.0 torch/utils/data/dataloader.py: __next__ -> _next_data -> _get_data -> _try_get_data, which
# waits in the workers' result queue (multiprocessing/queues.py get -> connection.py poll); as a traceback
# prints it after Ctrl-C
MAIN_WAITS_FOR_A_BATCH = """\
^CTraceback (most recent call last):
  File "train.py", line 88, in <module>
    for step, batch in enumerate(loader):
  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 733, in __next__
    data = self._next_data()
  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1480, in _next_data
    idx, data = self._get_data()
  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1442, in _get_data
    success, data = self._try_get_data()
  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1283, in _try_get_data
    data = self._data_queue.get(timeout=timeout)
  File "/usr/lib/python3.11/multiprocessing/queues.py", line 113, in get
    if not self._poll(timeout):
  File "/usr/lib/python3.11/multiprocessing/connection.py", line 257, in poll
    return self._poll(timeout)
KeyboardInterrupt
"""
# torch 2.13.0 torch/utils/data/dataloader.py _try_get_data: a worker that died, as torch reports it
WORKER_KILLED = "RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly\n"


def test_the_main_thread_waiting_for_a_batch_names_a_stage_not_a_sure_cause(cli_json, tmp_path):
    """The waiting side alone (evidence marked `place`) says the data does not come, not why: the
    workers may be deadlocked, killed for memory, or reading a dead mount. Under 50% until something
    of the workers is seen; their death makes it sure."""
    log = tmp_path / "train.log"
    log.write_text(MAIN_WAITS_FOR_A_BATCH)
    report = cli_json("--log", str(log))
    first = report["diagnoses"][0]
    assert first["cause"] == "dataloader", report["diagnoses"][:3]
    assert any(e.get("place") for e in first["evidence"]), first["evidence"]
    assert first["confidence"] < 0.5, first

    log.write_text(MAIN_WAITS_FOR_A_BATCH + WORKER_KILLED)
    sure = cli_json("--log", str(log))["diagnoses"][0]
    assert sure["cause"] == "dataloader" and sure["confidence"] >= 0.5, sure
