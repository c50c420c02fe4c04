"""The library-facts tables (skills/data/frames.yaml, log-catalog.yaml) and the matchers over them.

Example frames and lines below are written from the libraries' own format strings, not from cases.
"""

import re
from pathlib import Path

import pytest
import yaml

from debug_stuck.core.libfacts import JOB_FACTS, WAIT_KINDS, frame_matches, match_frame, match_log
from debug_stuck.kb import skills_dir
from debug_stuck.yamlio import load_yaml

FIELD_CASES = Path(__file__).parents[1] / "fixtures" / "field" / "cases"
FRAME_KEYS = {"id", "library", "function", "wait", "object", "released_by", "facts", "source"}
LOG_KEYS = {"id", "library", "versions", "message", "tokens", "fact", "source"}
# A source names a file (a path or a file name with an extension) or a doc, and a version.
SOURCE_PLACE = re.compile(r"[\w.+-]+/[\w./+-]+|\w+\.(py|c|cc|cpp|cu|h|hpp|rs|so)\b|docs\b")
SOURCE_VERSION = re.compile(r"\d+\.(\d+|x)\b|@[0-9a-f]{7,}")
# Bare names that many libraries share: an entry without a file must not claim them.
GENERIC_NAMES = [
    "get", "put", "wait", "join", "acquire", "release", "run", "recv", "send", "read", "write",
    "main", "__enter__", "__exit__", "result", "select", "poll", "connect", "accept", "__next__",
    "__call__", "load", "save", "step", "forward", "backward", "train", "map", "fetch", "close",
    "flush", "emit", "start", "sleep", "<module>", "<lambda>", "wrapper", "synchronize",
]  # fmt: skip
# py-spy dump's frame line: "    function (file:line)"
PY_SPY_FRAME = re.compile(r"^\s*(?P<function>\S+) \((?P<file>[^:()]+):\d+\)$")


@pytest.fixture(scope="module")
def frames_data():
    return load_yaml((skills_dir() / "data" / "frames.yaml").read_text())


@pytest.fixture(scope="module")
def frames(frames_data):
    return frames_data["frames"]


@pytest.fixture(scope="module")
def catalog_data():
    return load_yaml((skills_dir() / "data" / "log-catalog.yaml").read_text())


@pytest.fixture(scope="module")
def catalog(catalog_data):
    return catalog_data["entries"]


def ids(entries):
    return [entry["id"] for entry in entries]


def test_frame_closed_lists_are_the_code_lists(frames_data):
    assert set(frames_data["waits"]) == set(WAIT_KINDS)
    assert set(frames_data["facts"]) == set(JOB_FACTS)
    assert all(isinstance(meaning, str) and meaning for meaning in frames_data["waits"].values())
    assert all(isinstance(meaning, str) and meaning for meaning in frames_data["facts"].values())


def test_every_frame_entry_is_well_formed(frames):
    assert 150 <= len(frames) <= 450
    assert len(set(ids(frames))) == len(frames), "duplicate frame ids"
    for entry in frames:
        where = entry.get("id")
        assert FRAME_KEYS <= set(entry), (where, FRAME_KEYS - set(entry))
        optional = {"file", "call", "defers", "stand_in", "lost_at_fork", "polls", "backoff", "timer", "computes"}
        assert set(entry) <= FRAME_KEYS | optional, (where, set(entry) - FRAME_KEYS)
        # a stand-in for a builtin is no wait of its own, and names its file: it is a library's frame
        assert "stand_in" not in entry or (entry["stand_in"] is True and entry["wait"] == "busy" and "file" in entry)
        assert "call" not in entry or entry["wait"] == "collective", where  # a collective's name
        assert "backoff" not in entry or (entry["backoff"] is True and entry.get("polls") is True), where
        assert "timer" not in entry or entry["timer"] is True, where
        # a compute routine (a parser, a serializer) is work, never a wait
        assert "computes" not in entry or (entry["computes"] is True and entry["wait"] == "busy"), where
        # only a C frame of CPython's, with no file of its own, says "how" and defers to a frame above
        assert "defers" not in entry or (entry["defers"] is True and "file" not in entry), where
        re.compile(entry["function"])
        if "file" in entry:
            re.compile(entry["file"])
            assert entry["file"].endswith("$"), (where, "a file pattern is a suffix match")
        assert entry["wait"] in WAIT_KINDS, where
        assert set(entry["facts"]) <= set(JOB_FACTS), where
        assert all(isinstance(entry[key], str) and entry[key] for key in ("object", "released_by", "library")), where
        assert SOURCE_PLACE.search(entry["source"]), (where, "source names no file or doc")
        assert SOURCE_VERSION.search(entry["source"]), (where, "source names no version")


def test_frame_entries_without_a_file_do_not_claim_generic_names(frames):
    for entry in frames:
        if "file" in entry:
            continue
        claimed = [name for name in GENERIC_NAMES if re.fullmatch(entry["function"], name)]
        assert not claimed, (entry["id"], claimed)


def test_catalog_closed_fact_list_is_used_and_explained(catalog_data, catalog):
    facts = catalog_data["facts"]
    assert all(isinstance(meaning, str) and meaning for meaning in facts.values())
    assert {entry["fact"] for entry in catalog} == set(facts), "an unused or undefined fact"


def test_every_catalog_entry_is_well_formed(catalog_data, catalog):
    assert 120 <= len(catalog) <= 450
    assert len(set(ids(catalog))) == len(catalog), "duplicate catalog ids"
    for entry in catalog:
        where = entry.get("id")
        assert LOG_KEYS <= set(entry), (where, LOG_KEYS - set(entry))
        assert set(entry) <= LOG_KEYS | {"extract"}, (where, set(entry) - LOG_KEYS)
        assert entry["tokens"] and all(isinstance(token, str) and token.strip() for token in entry["tokens"]), where
        if "extract" in entry:
            assert re.compile(entry["extract"]).groupindex, (where, "extract has no named group")
        assert entry["fact"] in catalog_data["facts"], where
        assert isinstance(entry["versions"], str) and entry["versions"], where
        assert SOURCE_PLACE.search(entry["source"]), (where, "source names no file or doc")
        assert SOURCE_VERSION.search(entry["source"]), (where, "source names no version")


def test_every_message_matches_its_own_entry(catalog):
    for entry in catalog:
        found = ids(e for e, _ in match_log(catalog, entry["message"]))
        assert entry["id"] in found, entry["id"]


def test_py_spy_dataloader_frame_matches_only_the_dataloader_entry(frames):
    parsed = PY_SPY_FRAME.match("    _try_get_data (torch/utils/data/dataloader.py:1133)")
    found = frame_matches(frames, parsed["function"], parsed["file"])
    assert ids(found) == ["torch-dataloader-try-get-data"]
    entry = match_frame(frames, parsed["function"], parsed["file"])
    assert (entry["wait"], entry["facts"]) == ("queue", ["dataloader"])


@pytest.mark.parametrize(
    ("function", "file", "expected"),
    [
        # pystack: qualified names, absolute paths
        ("Condition.wait", "/usr/lib/python3.11/threading.py", "cpython-threading-condition-wait"),
        # faulthandler / Pool worker tracebacks
        ("get", "/usr/lib/python3.11/multiprocessing/queues.py", "mp-queue-get"),
        ("__enter__", "/opt/conda/lib/python3.10/multiprocessing/synchronize.py", "mp-semlock-enter"),
        ("_wait_for_tstate_lock", "threading.py", "cpython-threading-wait-for-tstate-lock"),
        # IPython prints the argument list after the name
        ("create_connection(address, timeout, source_address, all_errors)", "/usr/lib/python3.11/socket.py",
         "cpython-socket-create-connection"),
        ("all_reduce", "/site-packages/torch/distributed/distributed_c10d.py", "torch-c10d-all-reduce"),
        ("barrier", "lightning/pytorch/strategies/ddp.py", "lightning-strategy-barrier"),
        ("wait", "torch/utils/file_baton.py", "torch-cpp-ext-file-baton-wait"),
        ("urlopen", "urllib3/connectionpool.py", "urllib3-urlopen"),
        # native frames: gdb / pystack --native keep the argument list and return types
        ("c10d::ProcessGroupNCCL::WorkNCCL::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >)", None,
         "torch-c10d-native-nccl-wait"),
        ("cudaStreamSynchronize", "libcudart.so.12", "cuda-runtime-sync"),
        ("ncclCommInitRank", None, "nccl-comm-init"),
        ("<rayon_core::latch::LockLatch>::wait_and_reset", None, "tokenizers-rayon-wait"),
        # py-spy 0.4 --native prints Rust's v0-mangled names as they are (tokenizers 0.23, seen live)
        ("_RNvMs3_NtCsjpdOAJTRuNw_10rayon_core5latchNtB5_9LockLatch14wait_and_reset", "tokenizers/tokenizers.abi3.so",
         "tokenizers-rayon-wait"),
        ("lock_PyThread_acquire_lock", "Modules/_threadmodule.c", "cpython-native-lock-acquire"),
        # other frameworks
        ("_next_internal", "site-packages/tensorflow/python/data/ops/iterator_ops.py", "tf-data-iterator-next"),
        ("_call_tf_sessionrun", "tensorflow/python/client/session.py", "tf-session-call-tf-sessionrun"),
        ("block_until_ready", "site-packages/jax/_src/array.py", "jax-block-until-ready"),
        ("initialize", "site-packages/jax/_src/distributed.py", "jax-distributed-initialize"),
        ("rendezvous", "site-packages/torch_xla/core/xla_model.py", "torch-xla-rendezvous"),
        ("get", "site-packages/ray/_private/worker.py", "ray-get"),
        ("synchronize", "site-packages/detectron2/utils/comm.py", "detectron2-comm-synchronize"),
        ("collect_results_cpu", "site-packages/mmengine/dist/dist.py", "mmengine-collect-results"),
        ("wait_until_finished", "orbax/checkpoint/checkpoint_manager.py", "orbax-manager-wait-until-finished"),
    ],
)  # fmt: skip
def test_frames_from_every_dump_format(frames, function, file, expected):
    entry = match_frame(frames, function, file)
    assert entry is not None and entry["id"] == expected


def test_a_c_frame_of_a_call_yields_to_the_library_frame_that_says_what_it_waits_for(frames):
    """An idle pool worker reads its task pipe: CPython's os_read says how, multiprocessing's
    Connection._recv what for (a message from the parent, not a file read of the job's)."""
    from debug_stuck.core.facts import thread_facts

    worker = [
        "read (libc.so.6)",
        "os_read (posixmodule.c)",
        "_recv (multiprocessing/connection.py)",
        "_recv_bytes (multiprocessing/connection.py)",
        "recv (multiprocessing/connection.py)",
        "worker (multiprocessing/pool.py)",
    ]
    wait, _ = thread_facts(frames, worker, main=True)
    assert wait.startswith("wait=pipe entry=mp-connection-recv "), wait
    # with no library frame above it, the C frame is all there is to say
    wait, _ = thread_facts(frames, ["os_read (posixmodule.c)", "load_shard (train.py)"], main=True)
    assert wait.startswith("wait=file-read entry=cpython-native-os-read "), wait


@pytest.mark.parametrize(
    ("function", "file"),
    [
        ("wait", "myproject/threading_utils.py"),  # a name only, in a file no entry covers
        ("_try_get_data", "mylib/dataloader.py"),
        ("get", None),
        ("train_step", "train.py"),
    ],
)
def test_unrelated_frames_match_nothing(frames, function, file):
    assert match_frame(frames, function, file) is None


NCCL_TIMEOUT = (
    "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLGATHER, "
    "NumelIn=8, NumelOut=16, Timeout(ms)=600000) ran for 600123 milliseconds before timing out."
)


@pytest.mark.parametrize("cut", [NCCL_TIMEOUT.index(" operation"), NCCL_TIMEOUT.index("eration")])
def test_wrapped_nccl_watchdog_line_matches_by_tokens(catalog, cut):
    text = f"step 10\n{NCCL_TIMEOUT[:cut]}\n{NCCL_TIMEOUT[cut:]}\nstep 11"
    found = [(entry["id"], groups) for entry, groups in match_log(catalog, text)]
    assert found == [("torch-nccl-watchdog-timeout", {"rank": "2", "seq": "41", "op": "ALLGATHER"})]


def test_one_line_is_reported_once(catalog):
    text = f"{NCCL_TIMEOUT}\n{NCCL_TIMEOUT}"
    watchdog = [entry for entry, _ in match_log(catalog, text) if entry["id"] == "torch-nccl-watchdog-timeout"]
    assert len(watchdog) == 2


@pytest.mark.parametrize(
    "line",
    [
        # tokenizers python-v0.8.0
        "The current process just got forked. Disabling parallelism to avoid deadlocks...",
        # tokenizers python-v0.8.1 .. v0.22.1
        "huggingface/tokenizers: The current process just got forked, after parallelism has already been used. "
        "Disabling parallelism to avoid deadlocks...",
    ],
)
def test_every_tokenizers_fork_wording_reads_as_fork_after_threads(catalog, line):
    facts = {entry["fact"] for entry, _ in match_log(catalog, line)}
    assert facts == {"fork-after-threads"}


def test_progress_bar_groups(catalog):
    line = "Epoch 3:  96%|█████████▌| 96/100 [01:02<00:02,  1.54it/s, loss=0.12]"
    found = {entry["id"]: groups for entry, groups in match_log(catalog, line)}
    assert found["tqdm-bar"] == {
        "desc": "Epoch 3",
        "percent": "96",
        "n": "96",
        "total": "100",
        "elapsed": "01:02",
        "remaining": "00:02",
    }


def test_store_and_worker_lines_extract_their_fields(catalog):
    text = (
        "The client socket has timed out after 1800s while trying to connect to (10.0.0.5, 29500).\n"
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed. "
    )
    found = {entry["id"]: groups for entry, groups in match_log(catalog, text)}
    assert found["torch-socket-connect-timeout"] == {"host": "10.0.0.5", "port": "29500"}
    assert found["torch-dataloader-worker-killed"] == {"pid": "4242", "signal": "Killed"}


def test_ordinary_training_output_matches_nothing(catalog):
    assert match_log(catalog, "step 120 | loss 2.31 | lr 3.0e-04 | 812 tokens/s\nsaved metrics.json") == []


def test_the_event_before_the_first_timeout_is_the_prior_fact(catalog_data, catalog):
    from debug_stuck.core.facts import log_facts

    stall_reports = catalog_data["stall_reports"]
    assert set(stall_reports) <= set(catalog_data["facts"])
    # rank 0 builds an extension (Megatron's own line); the others' barrier times out meanwhile
    lines = ["> compiling and loading fused kernels ...", NCCL_TIMEOUT]
    facts = [text for _, text in log_facts(catalog, lines, stall_reports)]
    assert "prior=extension-build" in facts
    assert "last=collective-timeout" in facts
    # no timeout reported: nothing is prior to it
    assert not [f for _, f in log_facts(catalog, lines[:1], stall_reports) if f.startswith("prior=")]
    # a timeout with no event before it: no prior either
    assert not [f for _, f in log_facts(catalog, lines[1:], stall_reports) if f.startswith("prior=")]


def test_a_fact_rules_detail_names_the_library_message(cli_json, tmp_path):
    # jax.distributed.initialize could not register with its coordinator (XLA's own RPC name)
    log = tmp_path / "job.log"
    log.write_text("DEADLINE_EXCEEDED: Deadline Exceeded\nRPC: /tensorflow.CoordinationService/RegisterTask\n")
    report = cli_json("--log", log)
    assert report["diagnoses"][0]["cause"] == "rendezvous"
    details = [e["detail"] for e in report["diagnoses"][0]["evidence"] if e["source"] == "log"]
    assert any("(library message xla-coordination-register-task)" in detail for detail in details), details


@pytest.mark.parametrize(
    "line, fact",
    [
        # horovod stall_inspector.cc (the sentence every version prints)
        (
            "This may indicate that different ranks are trying to submit different tensors or that only subset of "
            "ranks is submitting tensors, which will cause deadlock.",
            "collective-timeout",
        ),
        # NCCL include/socket.h, src/misc/socket.cc
        (
            "host:123:456 [0] include/socket.h:344 NCCL WARN Net : Socket creation failed : Permission denied",
            "nccl-net-error",
        ),
        # nccl-tests src/common.cu results header
        (
            "#       size         count      type   redop    root     time   algbw   busbw #wrong",
            "collective-bench-start",
        ),
        # torch ProcessGroupWrapper.cpp under TORCH_DISTRIBUTED_DEBUG=DETAIL
        (
            "[Rank 1] Running collective: CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[4])",
            "collective-enter",
        ),
        # Megatron-LM megatron/initialize.py
        ("> compiling and loading fused kernels ...", "extension-build"),
        # fairseq v0.6.2-v0.8.0 trainer.py train_step (the message ends on a line of its own), v0.5.0-v0.6.0
        (
            "| WARNING: ran out of memory with exception: CUDA out of memory. Tried to allocate 20.00 MiB;\n"
            " Skipping batch",
            "oom-skipped",
        ),
        ("| WARNING: ran out of memory, skipping batch", "oom-skipped"),
        # torch 2.13.0 inductor on CPU, TORCH_LOGS=+torch._inductor.kernel.mm (printed by this machine's torch)
        (
            "I1127 21:38:42.770000 17431 torch/_inductor/kernel/mm.py:388] [0/0] Tuned aten.mm: m=64, n=16, k=32, "
            "mat1_dtype=torch.float32, mat2_dtype=torch.float32, output_layout=FixedLayout('cpu', torch.float32, "
            "size=[64, 16], stride=[16, 1])",
            "compile-start",
        ),
        # CPython 3.11.7 on this machine: socket.create_connection to a port nobody listens on
        ("ConnectionRefusedError: [Errno 111] Connection refused", "connect-refused"),
    ],
)
def test_library_lines_read_as_their_fact(catalog, line, fact):
    assert fact in {entry["fact"] for entry, _ in match_log(catalog, line)}


def test_an_out_of_memory_error_the_job_skipped_points_at_the_collective_it_left(cli_json, tmp_path):
    """fairseq caught the OOM and went on without the batch (its handle_ooms: "gpus may fail to
    sync"): the ranks that kept the batch wait in its all-reduce; memory did not stop the job."""
    log = tmp_path / "train.log"
    log.write_text(
        "| epoch 003:   1200 / 5000 loss=4.112, nll_loss=2.871, wps=9120\n"
        "| WARNING: ran out of memory with exception: CUDA out of memory. Tried to allocate 96.00 MiB (GPU 1; "
        "15.78 GiB total capacity; 14.20 GiB already allocated; 41.19 MiB free; 480.12 MiB cached);\n"
        " Skipping batch\n"
    )
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    ranked = [d["cause"] for d in report["diagnoses"]]
    assert ranked[0] == "collective" and ranked.index("memory-pressure") > 0, ranked
    details = [e["detail"] for e in report["diagnoses"][0]["evidence"] if e["source"] == "log"]
    assert any("(library message fairseq-oom-skip-batch)" in detail for detail in details), details


def test_inductor_ir_in_a_log_reads_as_compiling(catalog):
    """Only Inductor prints its IR's layouts: the repr as torch itself writes it, on any device."""
    torch = pytest.importorskip("torch")
    from torch._inductor.ir import FixedLayout

    layout = str(FixedLayout(torch.device("cuda", 0), torch.bfloat16, [512, 16512], [1, 512]))
    found = {entry["id"]: groups for entry, groups in match_log(catalog, f"[rank0]:  mat_a=StorageBox({layout}")}
    assert found["inductor-ir-layout"] == {"layout": "FixedLayout", "device": "cuda:0"}, found


def test_one_machine_rules_out_the_inter_node_network(cli_json, tmp_path):
    log = tmp_path / "job.log"
    log.write_text("host:1:1 [0] NCCL WARN Net : Socket creation failed : Address family not supported by protocol\n")
    one = [d["cause"] for d in cli_json("--log", log, "--answer", "nodes=1")["diagnoses"]]
    many = [d["cause"] for d in cli_json("--log", log, "--answer", "nodes=4")["diagnoses"]]
    assert one[0] == "nccl-init", one
    assert many[0] == "network", many


def test_a_store_timeout_after_training_is_not_the_rendezvous(cli_json, tmp_path):
    log = tmp_path / "job.log"
    fingerprint = (
        "[Rank 0] Running collective: CollectiveFingerPrint(SequenceNumber=1, OpType=BROADCAST, TensorShape=[1])"
    )
    log.write_text(f"{fingerprint}\nRuntimeError: Socket Timeout\n")
    at_start = cli_json("--log", log, "--answer", "phase=start")["diagnoses"]
    mid_run = cli_json("--log", log, "--answer", "phase=mid-run")["diagnoses"]
    assert at_start[0]["cause"] == "rendezvous", at_start
    assert mid_run[0]["cause"] == "collective", mid_run
    assert any("before the timeout" in e["detail"] for e in mid_run[0]["evidence"]), mid_run[0]


def test_a_dataset_scan_is_a_pending_cache_write_unless_the_cache_was_read(catalog):
    from debug_stuck.core.facts import log_facts

    # ultralytics data/dataset.py: cache_labels names the path without ".cache" while it scans;
    # get_labels shows the line of a cache it read, path and all
    fresh = "train: Scanning /mnt/data/labels/train... 590503 images, 79 backgrounds, 0 corrupt: 100% 590503/590503"
    cached = "train: Scanning /data/labels/train.cache... 128 images, 2 backgrounds, 0 corrupt: 100% 128/128"
    written = "train: New cache created: /data/labels/train.cache"
    ends_in = [
        [f for _, f in log_facts(catalog, lines) if f.startswith("log-ends-in=")]
        for lines in (
            ["Starting", fresh],
            ["Starting", cached],
            ["Starting", fresh, written],
        )
    ]
    assert ends_in == [
        ["log-ends-in=dataset-scan"],
        ["log-ends-in=dataset-cache-ready"],
        ["log-ends-in=dataset-cache-ready"],
    ]
    workers = [f for _, f in log_facts(catalog, ["Using 8 dataloader workers"])]
    assert workers == ["log=dataloader-config entry=ultralytics-dataloader-workers workers=8"]
    hub = [f for _, f in log_facts(catalog, ["Fetching 19 files:   0%|          | 0/19 [00:00<?, ?it/s]"])]
    assert "log-ends-in=hub-download" in hub


# Frameworks beyond torch: each line as the library prints it (prefixes included), from the source the
# catalog entry cites.
FRAMEWORK_LOGS = {
    # tensorflow 2.15.0 kernels/data/shuffle_dataset_op.cc: the fill loop logs every 10 s while it waits
    "dataloader": [
        "I tensorflow/core/common_runtime/gpu/gpu_device.cc:1886] Created device /job:localhost/replica:0/task:0/"
        "device:GPU:0 with 38249 MB memory:  -> device: 0, name: NVIDIA A100-SXM4-40GB, pci bus id: 0000:07:00.0, "
        "compute capability: 8.0",
        "Epoch 1/30",
        "I tensorflow/core/kernels/data/shuffle_dataset_op.cc:422] Filling up shuffle buffer (this may take a while): "
        "1953 of 50000",
    ],
    # openxla/xla xla/service/slow_operation_alarm.cc, printed after a separator line of asterisks
    "compile": [
        "I0000 00:00:1718000000.000000  4123 service.cc:145] XLA service 0x55d initialized for platform CUDA",
        "E0611 09:12:44.201339  4123 slow_operation_alarm.cc:65] ",
        "********************************",
        "[Compiling module jit_train_step] Very slow compile? If you want to file a bug, run with envvar "
        "XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.",
        "********************************",
    ],
    # slurm src/srun/libsrun/allocate.c: the allocation is still queued
    "rendezvous": [
        "srun: job 4242 queued and waiting for resources",
    ],
    # orbax checkpoint/_src/checkpointers/async_checkpointer.py: the train loop blocks on the last save
    "checkpoint-save": [
        "I0611 10:00:00.000000 139 checkpoint_manager.py:1200] [process=0][thread=MainThread] Saving checkpoint "
        "at step 5000",
        "I0611 10:05:00.000000 139 async_checkpointer.py:400] [process=0][thread=MainThread] Waiting for background "
        "save thread=async_save.",
    ],
    # openxla/xla xla/service/rendezvous.cc: all threads arrived, the leader's callback (NCCL clique set-up) never ended
    "nccl-init": [
        "E0611 10:00:00.000000 77 rendezvous.cc:40] [id=3] This thread has been waiting for `acquire clique for "
        "rank 0; clique=devices=[0,1]; run_id=1` for 20 seconds and may be stuck. All 2 threads joined the "
        "rendezvous, however the leader has not marked the rendezvous as completed. Leader can be deadlocked inside "
        "the rendezvous callback.",
    ],
}


@pytest.mark.parametrize("cause", sorted(FRAMEWORK_LOGS))
def test_a_framework_log_that_ends_in_its_own_wait_names_the_cause(cli_json, tmp_path, cause):
    log = tmp_path / "job.log"
    log.write_text("\n".join(FRAMEWORK_LOGS[cause]) + "\n")
    diagnoses = cli_json("--log", log)["diagnoses"]
    assert diagnoses and diagnoses[0]["cause"] == cause, [(d["cause"], d["confidence"]) for d in diagnoses]
    assert any(e["source"] == "log" for e in diagnoses[0]["evidence"]), diagnoses[0]["evidence"]


@pytest.mark.parametrize(
    "line, fact",
    [
        (
            "2023-05-01 I tensorflow/core/distributed_runtime/master.cc:282] CreateSession still waiting for response "
            "from worker: /job:worker/replica:0/task:1",
            "rendezvous-waiting",
        ),
        (
            "INFO:tensorflow:Coordinator stopped with threads still running: QueueRunnerThread-fifo_queue",
            "thread-stop-timeout",
        ),
        ("INFO:tensorflow:Graph was finalized.", "session-create"),
        ("LAUNCH INFO 2024-01-01 10:00:00,000 Waiting peer start...", "rendezvous-waiting"),
        (
            "E0611 coordination_service_agent.cc] Timed out while waiting for async_write_complete barrier.",
            "checkpoint-barrier-timeout",
        ),
        (
            "[05/01 10:00:00 fvcore.common.checkpoint]: Saving checkpoint to ./output/model_0004999.pth",
            "checkpoint-save-start",
        ),
    ],
)
def test_other_frameworks_lines_read_as_their_fact(catalog, line, fact):
    assert fact in {entry["fact"] for entry, _ in match_log(catalog, line)}


def test_the_xla_rendezvous_wordings_are_told_apart(catalog):
    leader = FRAMEWORK_LOGS["nccl-init"][0]
    missing = (
        "[id=3] This thread has been waiting for `all-reduce` for 20 seconds and may be stuck. Expected 8 threads to "
        "join the rendezvous, but not all of them arrived on time."
    )
    assert {e["fact"] for e, _ in match_log(catalog, leader)} == {"rendezvous-leader-stuck"}
    assert {e["fact"] for e, _ in match_log(catalog, missing)} == {"collective-timeout"}


def test_where_the_last_progress_bar_stopped_is_a_fact(catalog):
    from debug_stuck.core.facts import log_facts

    def ends_at(line):
        return [f for _, f in log_facts(catalog, ["Starting training", line]) if f.startswith("bar-ends-at=")]

    # tqdm's default meter: '{desc}: {percentage}%|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}]'
    assert ends_at("Epoch 3:  97%|█████████▋| 1163/1200 [10:01<00:19,  1.93it/s]") == ["bar-ends-at=near-end"]
    assert ends_at("Epoch 3:  40%|████      | 480/1200 [04:01<06:02,  1.99it/s]") == ["bar-ends-at=middle"]
    assert ends_at("Epoch 3: 100%|██████████| 1200/1200 [10:20<00:00,  1.93it/s]") == ["bar-ends-at=end"]
    # ultralytics 8.3+ draws its own bar: '{desc}: {percent}% {bar} {n}/{total} {rate} {elapsed}<{remaining}'
    assert ends_at("  3/100  7.1G  1.2  0.9  1.1  64  640: 96% ━━━━━━━━━━━╸ 220/229 5.1it/s 43.2s<1.8s") == [
        "bar-ends-at=near-end"
    ]
    assert ends_at("  3/100  7.1G  1.2  0.9  1.1  64  640: 100% ━━━━━━━━━━━━ 229/229 5.1it/s 45.0s") == [
        "bar-ends-at=end"
    ]
    assert ends_at("Fetching 13 files:   0%|          | 0/13 [05:54<?, ?it/s]") == []  # too short a loop to tell
    # a bar over something else than a training epoch says nothing about the epoch's end
    assert ends_at("Validation DataLoader 0:  96%|█████████▌| 96/100 [00:20<00:00,  4.71it/s]") == []
    assert ends_at("Caching images (12.1GB RAM):  95%|█████████▌| 950/1000 [01:02<00:03, 15.2it/s]") == []
    # mmengine: an epoch-based loop counts the epoch, an iteration-based one the whole run
    epoch_based = "mmengine - INFO - Epoch(train)  [3][1150/1173]  lr: 1.0e-02  eta: 0:01:00  time: 0.5  data_time: 0.1"
    iteration_based = (
        "mmengine - INFO - Iter(train) [ 95000/100000]  lr: 1.0e-02  eta: 1:00:00  time: 0.5  data_time: 0.1"
    )
    assert ends_at(epoch_based) == ["bar-ends-at=near-end"]
    assert ends_at(iteration_based) == []


def test_an_epoch_that_stops_in_its_last_batches_is_an_epoch_end_wait(cli_json, tmp_path):
    log = tmp_path / "job.log"
    log.write_text(
        "[rank0]: Epoch 3:  97%|█████████▋| 1163/1200 [10:01<00:19,  1.93it/s]\n"
        "[rank1]: Epoch 3:  97%|█████████▋| 1163/1200 [10:01<00:19,  1.93it/s]\n"
    )
    report = cli_json("--log", log, "--answer", "phase=mid-run", "--answer", "step=same-step")
    assert report["answers"]["event"]["value"] == "epoch-end", report["answers"]
    top = report["diagnoses"][0]
    assert top["cause"] == "collective", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    assert any("last tenth of its loop" in e["detail"] for e in top["evidence"]), top["evidence"]


@pytest.mark.parametrize(
    "lines, cause",
    [
        # ultralytics 8.2.0 utils/checks.py check_amp: rank 0 downloads and runs a small model, no timeout
        (["Ultralytics YOLOv8.2.0 🚀 Python-3.10.12 torch-2.2.0 CUDA:0 (NVIDIA A100, 81051MiB)",
          "AMP: running Automatic Mixed Precision (AMP) checks with YOLOv8n..."], "external-service"),
        # Megatron-LM core_v0.15.0 training.py: print_rank_0 before model construction
        (["> initialized tensor model parallel with size 2", "time to initialize megatron (seconds): 12.345",
          "building GPT model ..."], "model-init"),
        # slurm src/srun: a task killed by SIGKILL, most often the OOM killer
        (["[rank3]: step 420 loss 2.1", "srun: error: node17: task 3: Killed"], "memory-pressure"),
    ],
)  # fmt: skip
def test_more_framework_logs_name_their_cause(cli_json, tmp_path, lines, cause):
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    diagnoses = cli_json("--log", log)["diagnoses"]
    assert diagnoses and diagnoses[0]["cause"] == cause, [(d["cause"], d["confidence"]) for d in diagnoses]


@pytest.mark.parametrize(
    "line",
    [
        # deepspeed launcher/launch.py sigkill_handler tears the other ranks down after one failed
        "[INFO] [launch.py:315:sigkill_handler] Killing subprocess 45098",
        # torch elastic multiprocessing/api.py: the agent terminates the ranks left after one failed
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4242 closing signal SIGTERM",
        # Open MPI's mpirun after a rank returned non-zero
        "Primary job  terminated normally, but 1 process returned",
    ],
)
def test_a_launcher_ending_its_ranks_is_not_a_dataloader_worker_dying(catalog, line):
    facts = {e["fact"] for e, _ in match_log(catalog, line)}
    assert facts == {"rank-died"}, facts


def test_the_ranks_whose_watchdog_never_fired_are_the_ones_the_others_wait_for(cli_json, tmp_path):
    """LlamaFactory#2424 (field corpus): ranks 1-3 report the watchdog for collective #2 while rank 0
    tokenizes; rank 0 never entered it. A rank whose own timeout is in the log is no such rank."""
    case = yaml.safe_load((FIELD_CASES / "llamafactory-2424.yaml").read_text(encoding="utf-8"))
    log = tmp_path / "job.log"
    log.write_text(case["log"])
    said = [e["detail"] for e in cli_json("--log", log)["diagnoses"][0]["evidence"]]
    assert any(
        d.startswith("ranks 1,2,3 timed out waiting in collective #2 (ALLREDUCE) and rank(s) 0 did not") for d in said
    ), said
    log.write_text(case["log"].replace("[Rank 3]", "[Rank 0]"))  # ranks 0-2 all report: nobody is missing
    said = [e["detail"] for e in cli_json("--log", log)["diagnoses"][0]["evidence"]]
    assert not any("did not: a rank reports the watchdog" in d for d in said), said


@pytest.mark.parametrize(
    "symbol, path",
    [
        ("_RNvMs3_NtCsjpdOAJTRuNw_10rayon_core5latchNtB5_9LockLatch14wait_and_reset",
         "rayon_core::latch::LockLatch::wait_and_reset"),
        ("_RNvMNtNtNtNtCsgHYyB3hU8Ec_3std3sys4sync7condvar5futexNtB2_7Condvar4wait",
         "std::sys::sync::condvar::futex::Condvar::wait"),
        ("_RNvCs1234_7mycrate3foo", "mycrate::foo"),
        # not v0: C++ and legacy Rust (Itanium-style) names, plain C names, a truncated symbol
        ("_ZN10rayon_core5latch9LockLatch14wait_and_reset17h0123456789abcdefE", None),
        ("syscall", None),
        ("_RNvCs1234_7mycr", None),
    ],
)  # fmt: skip
def test_rust_v0_names_read_as_their_paths(symbol, path):
    from debug_stuck.core.rustnames import rust_v0_path

    assert rust_v0_path(symbol) == path
