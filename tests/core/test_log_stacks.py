"""Stack dumps in logs become stack evidence: real pasted dumps from the field corpus, each read back
as frames innermost first and matched by the same playbook signals as live stacks."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from debug_stuck.core.logstacks import extract_stacks

CASES = Path(__file__).parents[1] / "fixtures" / "field" / "cases"


def case(name: str) -> dict:
    return yaml.safe_load((CASES / f"{name}.yaml").read_text(encoding="utf-8"))


def frames(name: str):
    return [(t.kind, [f.text() for f in t.frames]) for t in extract_stacks(case(name)["log"].splitlines())]


def stack_evidence(cli, tmp_path, name: str):
    log = tmp_path / f"{name}.log"
    log.write_text(case(name)["log"], encoding="utf-8")
    code, out, err = cli("diagnose", "--log", str(log), "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    return report, [
        (d["cause"], e["detail"]) for d in report["diagnoses"] for e in d["evidence"] if e["source"] == "stack"
    ]


def test_a_faulthandler_dump_pasted_without_its_header(cli, tmp_path):
    # pytest-timeout's faulthandler dump: "File ..., line 50 in wait", innermost first
    [(kind, found)] = frames("openequivariance-156")
    assert kind == "faulthandler"
    assert found[:3] == [
        "wait (torch/utils/file_baton.py:50)",
        "_jit_compile (torch/utils/cpp_extension.py:2156)",
        "load (torch/utils/cpp_extension.py:1681)",
    ]
    report, evidence = stack_evidence(cli, tmp_path, "openequivariance-156")
    assert report["diagnoses"][0]["cause"] == "compile"
    assert any(cause == "compile" and "build lock" in detail for cause, detail in evidence), evidence


def test_a_stack_written_on_one_line_with_arrows(cli, tmp_path):
    [(kind, found)] = frames("miles-1357")
    assert kind == "chain"
    assert found[:2] == ["wait (threading.py:355)", "result (concurrent/futures/_base.py:451)"]
    report, evidence = stack_evidence(cli, tmp_path, "miles-1357")
    assert report["diagnoses"][0]["cause"] == "thread-deadlock", evidence


def test_a_gdb_backtrace_with_wrapped_arguments(cli, tmp_path):
    [(kind, found)] = frames("pytorch-130610")
    assert kind == "gdb"
    assert found == ["__internal_atexit (./stdlib/cxa_atexit.c:41)", "__GI___cxa_atexit (./stdlib/cxa_atexit.c:70)"]
    report, evidence = stack_evidence(cli, tmp_path, "pytorch-130610")
    assert report["diagnoses"][0]["cause"] == "thread-deadlock"
    assert any("glibc-internal lock" in detail for _, detail in evidence), evidence


def test_an_ipython_traceback(cli, tmp_path):
    [(kind, found)] = frames("ragatouille-245")
    assert kind == "ipython"
    assert found[0].startswith("try_load_torch_extensions (")
    report, _ = stack_evidence(cli, tmp_path, "ragatouille-245")
    assert "compile" in [d["cause"] for d in report["diagnoses"][:1]]


def test_a_python_2_ipython_traceback_names_the_compiled_files_source():
    # IPython 5 on Python 2.7 prints "<file>.pyc in <function>(<args>)", the line on "---> N" below it
    [(kind, found)] = frames("pytorch-2700")
    assert kind == "ipython"
    assert found[0] == "_lazy_new (torch/cuda/__init__.py:269)", found
    assert found[1] == "_cuda (torch/_utils.py:66)", found


def test_tracebacks_faulthandler_pyspy_and_gdb_formats():
    # Format shapes as the tools print them (CPython traceback and faulthandler, py-spy dump, gdb bt),
    # with the per-rank prefixes torchrun adds.
    log = [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/home/u/train.py", line 60, in main',
        "[rank1]:     for batch in loader:",
        '[rank1]:   File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1134, in '
        "_try_get_data",
        "[rank1]:     data = self._data_queue.get(timeout=timeout)",
        "[rank1]: KeyboardInterrupt",
        "Thread 0x00007f9b2c7fe700 (most recent call first):",
        '  File "/usr/lib/python3.8/threading.py", line 306 in wait',
        '  File "/usr/lib/python3.8/queue.py", line 179 in get',
        'Thread 12345 (idle): "MainThread"',
        "    all_reduce (torch/distributed/distributed_c10d.py:2050)",
        "    train (train.py:40)",
        "#0  0x00007f8e5c2a1d45 in __futex_abstimed_wait_common64 (private=0) at ./nptl/futex-internal.c:57",
        "#1  0x00007f8d1b2c1a1d in c10d::ProcessGroupNCCL::WorkNCCL::synchronizeInternal(std::chrono::duration<long,"
        " std::ratio<1l, 1000l> >) () from /usr/lib/libtorch_cuda.so",
    ]
    threads = extract_stacks(log)
    assert [t.kind for t in threads] == ["traceback", "faulthandler", "py-spy", "gdb"]
    tb, fh, spy, gdb = threads
    assert [f.text() for f in tb.frames] == [
        "_try_get_data (torch/utils/data/dataloader.py:1134)",
        "main (/home/u/train.py:60)",
    ]
    assert tb.exception == "KeyboardInterrupt"
    assert [f.text() for f in fh.frames] == ["wait (threading.py:306)", "get (queue.py:179)"]
    assert (
        spy.name == "MainThread" and spy.frames[0].text() == "all_reduce (torch/distributed/distributed_c10d.py:2050)"
    )
    assert [f.function for f in gdb.frames] == [
        "__futex_abstimed_wait_common64",
        "c10d::ProcessGroupNCCL::WorkNCCL::synchronizeInternal",
    ]


def test_a_log_with_no_dump_gives_no_stacks():
    assert extract_stacks(case("nanochat-477")["log"].splitlines()) == []


def test_a_traceback_fragment_pasted_without_its_header(cli, tmp_path):
    # The middle of a Lightning traceback: a rank waiting in the checkpoint barrier.
    [(kind, found)] = frames("lightning-19045")
    assert kind == "traceback"
    assert found[:3] == [
        "barrier (torch/distributed/distributed_c10d.py:3696)",
        "wrapper (torch/distributed/c10d_logger.py:47)",
        "barrier (lightning/pytorch/strategies/ddp.py:290)",
    ]
    report, evidence = stack_evidence(cli, tmp_path, "lightning-19045")
    assert report["diagnoses"][0]["cause"] == "collective"
    assert ("collective", "traceback in lightning-19045.log: a rank waits in torch.distributed.barrier") in evidence


def test_a_traceback_that_lost_its_indentation_keeps_every_frame(tmp_path):
    # Pasted with every line at column 0: frames and source lines alternate.
    [(kind, found)] = frames("jetson-inference-782")
    assert found[0] == "_poll (multiprocessing/connection.py:414)"
    assert found[-1] == "<module> (train_ssd.py:346)" and len(found) == 9


def test_a_child_process_traceback_is_named_after_the_process(cli, tmp_path):
    threads = extract_stacks(case("wandb-3223")["log"].splitlines())
    assert threads[0].name == "process wandb_internal"
    report, evidence = stack_evidence(cli, tmp_path, "wandb-3223")
    assert report["diagnoses"][0]["cause"] == "external-service"
    assert any(
        cause == "external-service" and detail.startswith("traceback 'process wandb_internal'")
        for cause, detail in evidence
    )


# --- dumps of real hung jobs on an H200 (bench/gpu_check.py; tests/fixtures/gpu/README.md) -------

H200 = Path(__file__).parents[1] / "fixtures" / "gpu" / "h200"


def test_a_pystack_native_dump_reads_as_threads_innermost_first():
    threads = extract_stacks((H200 / "dataloader-pystack.txt").read_text(encoding="utf-8").splitlines())
    assert [t.kind for t in threads] == ["pystack"] * len(threads) and len(threads) >= 4
    main = next(t for t in threads if any("_try_get_data" in f.text() for f in t.frames))
    found = [f.text() for f in main.frames]
    assert found[:3] == ["__poll (libc.so.6)", "select (selectors.py:415)", "wait (multiprocessing/connection.py:1136)"]
    assert "_try_get_data (torch/utils/data/dataloader.py:1310)" in found
    engine = next(t for t in threads if t.name == "pt_autograd_0")
    assert engine.frames[0].text() == "pthread_cond_wait (libc.so.6)"  # "(C) File ..., in sym (lib)"
    assert "torch::autograd::ReadyQueue::pop (libtorch_cpu.so)" in [f.text() for f in engine.frames]
    sync = extract_stacks((H200 / "cuda_sync-pystack.txt").read_text(encoding="utf-8").splitlines())[0]
    # argument lists and " const" are dropped, unnamed ("???") native frames left out
    assert [f.text() for f in sync.frames][:3] == [
        "cuStreamSynchronize (libcuda.so.580.159.04)",
        "cudaStreamSynchronize (libcudart.so.13)",
        "c10::cuda::CUDAStream::synchronize (libc10_cuda.so)",
    ]


def test_a_pystack_dump_pasted_from_a_coloured_terminal_reads_the_same():
    plain = (H200 / "cuda_sync-pystack.txt").read_text(encoding="utf-8").splitlines()
    # pystack's colours (traceback_formatter): green "(Python)", blue "(C)", yellow function names
    coloured = [
        line.replace("(Python)", "\x1b[32m(Python)\x1b[0m").replace("(C)", "\x1b[34m(C)\x1b[0m") for line in plain
    ]
    as_text = [[f.text() for f in t.frames] for t in extract_stacks(plain)]
    assert as_text and as_text == [[f.text() for f in t.frames] for t in extract_stacks(coloured)]


@pytest.mark.parametrize(
    "dump, cause",
    [
        ("cuda_sync-py-spy", "cuda-sync"),
        ("cuda_sync-py-spy-native", "cuda-sync"),
        ("cuda_sync-pystack", "cuda-sync"),
        ("dataloader-py-spy", "dataloader"),
        ("dataloader-py-spy-native", "dataloader"),
        ("dataloader-pystack", "dataloader"),
        # H100, pin_memory=True: the main thread in queue.Queue.get, the pin-memory thread on the workers
        ("../h100/dataloader_pinned-py-spy", "dataloader"),
        ("../h100/dataloader_pinned-py-spy-native", "dataloader"),
        ("../h100/dataloader_pinned-pystack", "dataloader"),
    ],
)
def test_a_real_gpu_jobs_dump_pasted_alone_names_its_cause(cli, dump, cause):
    code, out, err = cli("diagnose", "--log", str(H200 / f"{dump}.txt"), "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["diagnoses"][0]["cause"] == cause, [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    assert any(e["source"] == "stack" for e in report["diagnoses"][0]["evidence"])


# --- dumps of a jax.distributed process waiting for a peer that never comes (bench/gpu_check.py) ---

H100 = Path(__file__).parents[1] / "fixtures" / "gpu" / "h100"
JAX_FIXTURES = Path(__file__).parents[1] / "fixtures" / "jax"


def test_a_native_frame_named_with_parentheses_keeps_the_python_frames_under_it():
    # py-spy --native prints nanobind's C++ frames in full, argument lists and lambdas included
    threads = extract_stacks((H100 / "jax_init-py-spy-native.txt").read_text(encoding="utf-8").splitlines())
    found = [f.text() for f in threads[0].frames]
    assert "initialize (jax/_src/distributed.py:218)" in found
    assert found.index("xla::CoordinationServiceAgent::Connect (jaxlib/libjax_common.so)") < found.index(
        "initialize (jax/_src/distributed.py:218)"
    )
    assert found[-2:] == ["<module> (gpu_check.py:442)", "0x7f9ecd02a1ca (libc.so.6)"]


@pytest.mark.parametrize(
    "dump",
    [
        H100 / "jax_init-py-spy.txt",  # Python 3.12, jax 0.11.2
        H100 / "jax_init-py-spy-native.txt",
        H100 / "jax_init-pystack.txt",
        JAX_FIXTURES / "distributed-init-py-spy-native.txt",  # Python 3.11, jax 0.10.2, with py-spy's shims
    ],
    ids=lambda path: path.name,
)
def test_a_jax_process_waiting_in_distributed_initialize_is_at_the_rendezvous(cli_json, dump):
    # one process in the dump, and no word of ranks in it: the jax.distributed frame is the sign of
    # a distributed job (frames.yaml facts), so the single-process census does not hold
    report = cli_json("--log", str(dump))
    top = report["diagnoses"][0]
    assert top["cause"] == "rendezvous", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    assert any("jax-distributed-initialize" in e["detail"] for e in top["evidence"]), top["evidence"]


@pytest.mark.parametrize("dump", ["multihost-sync-py-spy.txt", "multihost-sync-py-spy-native.txt"])
def test_a_jax_process_in_sync_global_devices_waits_in_a_collective(cli_json, dump):
    # two processes' dumps: process 0 in multihost_utils.sync_global_devices, process 1 in its own loop
    report = cli_json("--log", str(JAX_FIXTURES / dump))
    top = report["diagnoses"][0]
    assert top["cause"] == "collective", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    assert any("waits in a collective" in e["detail"] for e in top["evidence"]), top["evidence"]


@pytest.mark.parametrize("dump", ["compile_autotune-py-spy.txt", "compile_autotune-py-spy-native.txt"])
def test_a_pasted_dump_of_torch_compile_autotuning_names_the_compiler(cli_json, dump):
    # torch.compile(mode="max-autotune-no-cudagraphs") at its first step on an H100: Dynamo, Inductor,
    # Triton autotuning in a thread pool (bench/gpu_check.py compile_autotune)
    report = cli_json("--log", str(H100 / dump))
    top = report["diagnoses"][0]
    assert top["cause"] == "compile", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    assert any("Inductor is generating code" in e["detail"] for e in top["evidence"]), top["evidence"]


@pytest.mark.parametrize("dump", ["nccl_late_rank-py-spy-native.txt", "nccl_late_rank-pystack.txt"])
def test_a_pasted_native_dump_of_a_rank_in_nccls_bootstrap_is_communicator_setup(cli_json, dump):
    # rank 0 of two in its first all_reduce on an H100, inside bootstrapInit (accept): NCCL 2.28's
    # frames as py-spy --native and pystack --native print them (bench/gpu_check.py nccl_late_rank)
    report = cli_json("--log", str(H100 / dump))
    top = report["diagnoses"][0]
    assert top["cause"] == "nccl-init", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    assert any("inside NCCL communicator setup" in e["detail"] for e in top["evidence"]), top["evidence"]


# --- real TensorFlow jobs (tests/fixtures/tensorflow/README.md) ---------------------------------------

TF_FIXTURES = Path(__file__).parents[1] / "fixtures" / "tensorflow"


@pytest.mark.parametrize("dump", ["from-generator-stuck-py-spy.txt", "from-generator-stuck-py-spy-native.txt"])
def test_a_tf_data_generator_that_stops_yielding_is_the_input_pipeline(cli_json, dump):
    report = cli_json("--log", str(TF_FIXTURES / dump))
    top = report["diagnoses"][0]
    assert top["cause"] == "dataloader", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    assert any("Dataset.from_generator waits in its own code" in e["detail"] for e in top["evidence"]), top["evidence"]
    assert report["job"]["context"]["stack"] == "tensorflow"


@pytest.mark.parametrize("pasted", ["mwms-missing-worker-py-spy.txt", "mwms-missing-worker-log.txt"])
def test_a_multi_worker_strategy_waiting_for_a_worker_is_at_the_rendezvous(cli_json, pasted):
    report = cli_json("--log", str(TF_FIXTURES / pasted))
    top = report["diagnoses"][0]
    assert top["cause"] == "rendezvous", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    assert report["job"]["context"]["stack"] == "tensorflow"
    titles = [f["title"] for f in top["fixes"]]
    assert "Give every TensorFlow worker the same cluster and its own task" in titles, titles
    assert {f["title"]: f["why"] for f in top["fixes_left_out"]}["Use a free port"] == "for torch; this job: tensorflow"


def test_a_saved_tool_dump_is_not_a_silent_log(cli_json, tmp_path):
    """A py-spy dump saved to a file stops growing when py-spy ends: its age says when the dump was
    taken, not that the job went quiet. A rank evaluating on its GPU while the other waits in a
    barrier (recorded on an H100) is not called hung from its dumps' age; a log as old is."""
    dumps = []
    for name in ("eval_while_waiting-py-spy.txt", "eval_while_waiting-peer-py-spy.txt"):
        dumps.append(tmp_path / name)
        dumps[-1].write_bytes((H100 / name).read_bytes())
    log = tmp_path / "train.log"
    log.write_text("epoch 1 step 40 loss 0.52\nrunning evaluation\n")
    three_hours_ago = time.time() - 3 * 3600
    for path in (*dumps, log):
        os.utime(path, (three_hours_ago, three_hours_ago))
    report = cli_json(*[a for d in dumps for a in ("--log", d)])
    assert report["verdict"]["hung"] is None, report["verdict"]
    assert not any("has not changed" in e["detail"] for d in report["diagnoses"] for e in d["evidence"])
    assert cli_json(*[a for d in dumps for a in ("--log", d)], "--log", log)["verdict"]["hung"] is True


@pytest.mark.parametrize("one_file", [False, True])
def test_pasted_dumps_of_ranks_name_the_one_not_in_the_collective(cli_json, tmp_path, one_file):
    """Rank 1 waits in a barrier, rank 0 evaluates (recorded on an H100): the one the others wait
    for is named, with how to tell a long pass from a stuck one. Both dumps pasted into one file
    are two processes, not one thread of mixed frames."""
    texts = [(H100 / n).read_text() for n in ("eval_while_waiting-py-spy.txt", "eval_while_waiting-peer-py-spy.txt")]
    paths = [tmp_path / "ranks.txt"] if one_file else [tmp_path / "rank0.txt", tmp_path / "rank1.txt"]
    for path, text in zip(paths, ["\n".join(texts)] if one_file else texts):
        path.write_text(text)
    report = cli_json(*[a for p in paths for a in ("--log", p)])
    first = report["diagnoses"][0]
    assert first["cause"] == "collective", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    said = [e["detail"] for e in first["evidence"]]
    assert any("a rank waits in torch.distributed.barrier" in d for d in said), said
    straggler = [d for d in said if "1 of 2 processes waiting in barrier" in d]
    assert straggler and "at child_eval_while_waiting (gpu_check.py:253)" in straggler[0], said
    assert "dump that process again a minute later" in straggler[0]


def test_pasted_dumps_of_a_rank_saving_while_the_other_waits_name_the_save(cli_json):
    """Rank 0 in torch.save, rank 1 in a barrier (recorded on an H100): the others wait for the save,
    so the cause is the save's, not the collective's, with how to tell a long save from a stuck one."""
    dumps = [H100 / n for n in ("save_while_waiting-py-spy.txt", "save_while_waiting-peer-py-spy.txt")]
    report = cli_json(*[a for d in dumps for a in ("--log", d)])
    first = report["diagnoses"][0]
    assert first["cause"] == "checkpoint-save", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    said = [e["detail"] for e in first["evidence"]]
    straggler = [d for d in said if "1 of 2 processes waiting in barrier while one saves a checkpoint" in d]
    assert straggler and "at _save (torch/serialization.py:1313)" in straggler[0], said
    collective = next(d for d in report["diagnoses"] if d["cause"] == "collective")
    assert not any("processes waiting in" in e["detail"] for e in collective["evidence"])


def test_pasted_dumps_of_a_rank_in_all_reduce_and_a_stopped_rank_name_the_stopped_one(cli_json):
    """Rank 1 stopped itself with SIGSTOP (py-spy cannot attach to it: its dump is pystack's), rank 0
    waits in all_reduce (recorded on an H100): a collective, and the rank elsewhere is named."""
    dumps = [H100 / n for n in ("stopped_rank-py-spy.txt", "stopped_rank-peer-pystack.txt")]
    report = cli_json(*[a for d in dumps for a in ("--log", d)])
    first = report["diagnoses"][0]
    assert first["cause"] == "collective", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    said = [e["detail"] for e in first["evidence"]]
    assert any("1 of 2 processes waiting in all_reduce and one elsewhere, at child_stopped_rank" in d for d in said)


def test_a_dataloader_workers_dump_beside_a_ranks_is_no_straggler(cli_json, tmp_path):
    """A rank waiting in a barrier and a DataLoader worker's dump (both real, py-spy): the worker is
    not a rank the others wait for, so no straggler is named."""
    worker = tmp_path / "worker.txt"
    worker.write_text(
        (Path(__file__).parents[1] / "fixtures" / "stacks" / "ipykernel-dataloader-worker-py-spy.txt").read_text()
    )
    rank = tmp_path / "rank1.txt"
    rank.write_text((H100 / "eval_while_waiting-peer-py-spy.txt").read_text())
    report = cli_json("--log", worker, "--log", rank)
    said = [e["detail"] for d in report["diagnoses"] for e in d["evidence"]]
    assert not any("processes waiting in" in d for d in said), said


# A live job's log (the seventh hunt's h_poll): an ingest helper's torch.save failed once at start;
# the trainer itself sleeps in its poll loop. Then a Ctrl-C traceback of a hang, for contrast.
RAISED = """Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/venv/lib/python3.11/site-packages/torch/serialization.py", line 1002, in save
    with _open_zipfile_writer(f) as opened_zipfile:
         ^^^^^^^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/torch/serialization.py", line 864, in _open_zipfile_writer
    return container(name_or_buffer)  # type: ignore[arg-type]
  File "/venv/lib/python3.11/site-packages/torch/serialization.py", line 828, in __init__
    torch._C.PyTorchFileWriter(
RuntimeError: Parent directory shards does not exist.
trained on shards/s1.pt: loss 0.1367
Traceback (most recent call last):
  File "train.py", line 9, in <module>
    time.sleep(15)
KeyboardInterrupt
"""


def test_a_live_jobs_log_traceback_that_raised_is_history_not_a_stack_of_the_hang():
    from debug_stuck.core.classify import Observations
    from debug_stuck.core.logs import _observe_stacks

    def stack_lines(live):
        obs = Observations()
        _observe_stacks("/job/job.log", RAISED.splitlines(), obs, live=live)
        return [line.text for line in obs.lines.get("stack", [])]

    assert "save (torch/serialization.py:1002)" in stack_lines(live=False)  # a pasted report: evidence
    live = stack_lines(live=True)
    assert not any("serialization.py" in text for text in live), live  # that call raised and is over
    assert "<module> (train.py:9)" in live  # a Ctrl-C's traceback is where the job was
