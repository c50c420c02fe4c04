"""Flight Recorder (FR) dumps from real gloo jobs: read them (pickle, JSON, every format version),
match collectives across ranks, name the rank that holds the others up, and get a dump from a live
job through debug_stuck.hook.

The jobs are tests/targets/fr_gloo_job.py (ranks forked in one process group, each dumping its FR
with `_dump_fr_trace()` right where it hangs) and tests/targets/fr_hooked_gloo.py (torchrun, the
hook installed, a rank blocked in a real all_reduce). Every job is killed by process group and PID
in a finalizer (debug_stuck.zoo.spawn).
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from debug_stuck.core.flight_recorder import analyze  # noqa: E402
from debug_stuck.probes.collectors.flight_recorder import (  # noqa: E402
    decode_dump,
    dump_locations,
    read_dump_file,
    read_flight_recorder,
)
from debug_stuck.zoo import spawn  # noqa: E402

TARGETS = Path(__file__).resolve().parents[1] / "targets"
JOB = TARGETS / "fr_gloo_job.py"
HOOKED = TARGETS / "fr_hooked_gloo.py"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "flight_recorder"
START_SECONDS = 90.0


def site_line(script: Path, tag: str) -> int:
    """The line of `script` carrying the comment `# site:<tag>`."""
    for number, text in enumerate(script.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# site:{tag}"):
            return number
    raise LookupError(tag)


def wait_for(paths, job, seconds: float = START_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not all(Path(p).exists() for p in paths):
        if job.proc.poll() is not None:
            pytest.fail(f"the job exited ({job.proc.returncode}) first:\n{job.log_text()[-3000:]}")
        if time.monotonic() > deadline:
            missing = [str(p) for p in paths if not Path(p).exists()]
            pytest.fail(f"no {missing} after {seconds:g} s:\n{job.log_text()[-3000:]}")
        time.sleep(0.05)


def run_scenario(scenario: str, tmp: Path) -> Path:
    """Run the job until every rank has dumped, stop it, return the dump folder."""
    out = tmp / scenario
    out.mkdir(parents=True)
    world = 3 if scenario == "never_reaches" else 2
    argv = [sys.executable, str(JOB), scenario, str(out), str(spawn.free_port())]
    env = {"TORCH_FR_BUFFER_SIZE": "2000", "GLOO_SOCKET_IFNAME": "lo"}
    jobs = []
    try:
        job = spawn.start(f"fr-{scenario}", tmp, argv=argv, env=env, wait_ready=False, on_spawn=jobs.append)
        wait_for([out / f"nccl_trace_rank_{r}" for r in range(world)], job)
    finally:
        for job in jobs:
            job.stop()
    return out


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Each scenario's dump folder; the jobs run once for the module, one after the other."""
    root = tmp_path_factory.mktemp("fr")
    made = {}

    def get(scenario: str) -> Path:
        if scenario not in made:
            made[scenario] = run_scenario(scenario, root)
        return made[scenario]

    return get


def both_forms(folder: Path):
    """(analysis of the pickles, analysis of the JSON dumps) of one job."""
    pickles = read_flight_recorder([str(folder)])
    assert not pickles.errors, pickles.errors
    assert all(d.form == "pickle" for d in pickles.dumps)
    jsons = read_flight_recorder([str(folder / "json")])
    assert not jsons.errors, jsons.errors
    assert all(d.form == "json" for d in jsons.dumps)
    return analyze(pickles.by_rank()), analyze(jsons.by_rank())


def site(side: dict) -> tuple:
    return Path(side["call_site"]["file"]).name, side["call_site"]["line"]


@pytest.mark.timeout(180)
def test_a_rank_in_another_collective_is_named_with_both_sides(dumps):
    result, from_json = both_forms(dumps("other_collective"))
    problem = result.primary
    assert (problem.kind, problem.seq, result.culprits) == ("op-mismatch", 3, [1])
    assert (problem.sides[0]["op"], problem.sides[0]["seq"]) == ("gloo:all_reduce", 3)
    assert (problem.sides[1]["op"], problem.sides[1]["seq"]) == ("gloo:broadcast", 3)
    assert site(problem.sides[0]) == (JOB.name, site_line(JOB, "other_collective:0"))
    assert site(problem.sides[1]) == (JOB.name, site_line(JOB, "other_collective:1"))
    line = result.findings[0]
    assert "rank 1 is in gloo:broadcast" in line and "gloo:all_reduce" in line and "#3" in line
    assert f"{JOB.name}:{site_line(JOB, 'other_collective:1')}" in line
    assert result.cause == "collective" and result.culprit_state == "different-op"
    assert (from_json.culprits, from_json.primary.kind) == ([1], "op-mismatch")


@pytest.mark.timeout(180)
def test_a_rank_that_never_reaches_the_collective_is_the_culprit(dumps):
    result, from_json = both_forms(dumps("never_reaches"))
    problem = result.primary
    assert (problem.kind, problem.seq, result.culprits) == ("missing", 3, [1])
    for waiting in (0, 2):
        assert (problem.sides[waiting]["op"], problem.sides[waiting]["seq"]) == ("gloo:all_reduce", 3)
        assert site(problem.sides[waiting]) == (JOB.name, site_line(JOB, "never_reaches:waiting"))
    absent = problem.sides[1]
    assert (absent["present"], absent["last_seq"], absent["last_op"]) == (False, 2, "gloo:broadcast")
    assert site(absent) == (JOB.name, site_line(JOB, "never_reaches:last"))
    assert result.behind == {"0": [1]}
    assert result.culprit_state == "behind" and result.cause == "collective"
    assert result.rank_status[1]["0"]["last_enqueued"] == 2 and result.rank_status[0]["0"]["last_enqueued"] == 3
    assert "rank 1 never reached it: its last was gloo:broadcast #2" in result.findings[0]
    assert from_json.culprits == [1] and from_json.primary.kind == "missing"
    summary = result.to_dict()
    assert summary["collective"] == "gloo:all_reduce" and summary["seq"] == 3
    assert summary["call_site"]["line"] == site_line(JOB, "never_reaches:last")
    json.dumps(summary)  # plain data


@pytest.mark.timeout(180)
def test_a_size_mismatch_names_the_odd_rank_and_both_sizes(dumps):
    result, from_json = both_forms(dumps("size_mismatch"))
    problem = result.primary
    assert (problem.kind, problem.seq, result.culprits) == ("size-mismatch", 2, [1])
    assert problem.sides[1]["input_sizes"] == [[8]] and problem.sides[0]["input_sizes"] == [[4]]
    assert site(problem.sides[1]) == (JOB.name, site_line(JOB, "size_mismatch"))
    assert "rank 1 has [[8]]" in result.findings[0] and "[[4]]" in result.findings[0]
    assert (from_json.culprits, from_json.primary.kind) == ([1], "size-mismatch")


@pytest.mark.timeout(180)
def test_the_hang_in_a_second_process_group_is_found_there(dumps):
    result, from_json = both_forms(dumps("second_group"))
    assert len(result.problems) == 1, result.findings  # the default group is healthy
    problem = result.primary
    assert (problem.pg_desc, problem.kind, problem.seq, result.culprits) == ("tp", "missing", 2, [1])
    assert site(problem.sides[0]) == (JOB.name, site_line(JOB, "second_group"))
    assert "on pg 1 (tp)" in result.findings[0]
    assert result.rank_status[1]["1"]["last_enqueued"] == 1
    assert from_json.culprits == [1] and from_json.primary.pg_desc == "tp"


# --- the recorded dumps of a real job (tests/fixtures/flight_recorder) --------------------------


def test_the_recorded_dumps_read_as_folder_prefix_and_files_in_both_forms():
    by_folder = read_flight_recorder([str(FIXTURE)])
    by_prefix = read_flight_recorder([str(FIXTURE / "nccl_trace_rank_")])
    files = [str(FIXTURE / "json" / f"nccl_trace_rank_{r}.json") for r in range(3)]
    by_files = read_flight_recorder(files)
    for read, form in ((by_folder, "pickle"), (by_prefix, "pickle"), (by_files, "json")):
        assert not read.errors, read.errors
        assert [(d.rank, d.form, d.data["version"]) for d in read.dumps] == [(r, form, "2.10") for r in range(3)]
        result = analyze(read.by_rank())
        assert result.culprits == [1] and result.primary.kind == "missing" and result.primary.seq == 3
    frames = by_folder.dumps[0].data["entries"][-1]["frames"]
    assert frames[-1]["filename"].endswith("fr_gloo_job.py")


def test_a_pickle_and_its_json_twin_of_one_rank_count_once_the_pickle_preferred():
    read = read_flight_recorder([str(FIXTURE), str(FIXTURE / "json")])
    chosen = read.by_rank()
    assert sorted(chosen) == [0, 1, 2]
    assert all(entry["frames"] for entry in chosen[0]["entries"])
    assert len([e for e in read.errors if "two dumps" in e]) == 3


def _as_version_1_4(dump: dict) -> dict:
    """The same dump in the 1.4 layout (torch 2.3): seq_id, pg_id, pg_config {pg_id: [ranks]}."""
    entries = []
    for e in dump["entries"]:
        old = {k: v for k, v in e.items() if k not in ("collective_seq_id", "p2p_seq_id", "is_p2p", "process_group")}
        old.pop("input_dtypes", None)
        old.pop("output_dtypes", None)
        old["seq_id"] = e["collective_seq_id"]
        entries.append(old)
    return {"version": "1.4", "entries": entries, "pg_config": {0: [0, 1, 2]}}


def _as_version_1_1(dump: dict) -> dict:
    """1.1 (torch 2.2): no record_id, no pg_config, no pg_status."""
    entries = [{k: v for k, v in e.items() if k != "record_id"} for e in _as_version_1_4(dump)["entries"]]
    return {"version": "1.1", "entries": entries}


@pytest.mark.parametrize("convert", [_as_version_1_4, _as_version_1_1])
def test_older_format_versions_give_the_same_verdict(convert, tmp_path):
    for rank in range(3):
        raw = pickle.loads((FIXTURE / f"nccl_trace_rank_{rank}").read_bytes())
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(convert(raw), protocol=2))
    read = read_flight_recorder([str(tmp_path)])
    assert not read.errors, read.errors
    result = analyze(read.by_rank())
    assert result.culprits == [1] and result.primary.kind == "missing" and result.primary.seq == 3
    assert result.primary.sides[0]["op"] == "gloo:all_reduce"


def test_a_pickle_that_would_run_a_command_is_refused_without_running_it(tmp_path):
    witness = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {witness}",))

    for protocol in (0, 2, pickle.HIGHEST_PROTOCOL):
        path = tmp_path / f"nccl_trace_rank_{protocol}"
        path.write_bytes(pickle.dumps(Payload(), protocol=protocol))
        dump, error = read_dump_file(str(path))
        assert dump is None
        assert error.startswith(f"could not read {path}: pickle refused") and "system" in error
    assert not witness.exists()


def test_what_cannot_be_read_is_one_line_each_never_an_exception(tmp_path):
    os.mkfifo(tmp_path / "nccl_trace_rank_0")  # nobody writes it: opening it to read would block
    (tmp_path / "nccl_trace_rank_1").write_bytes(b"\x00\x01 not a dump")
    (tmp_path / "nccl_trace_rank_2").write_bytes((FIXTURE / "nccl_trace_rank_2").read_bytes())
    started = time.monotonic()
    read = read_flight_recorder([str(tmp_path), str(tmp_path / "nope_"), "/dev/zero"])
    assert time.monotonic() - started < 10
    assert [d.rank for d in read.dumps] == [2]
    expected = [
        f"could not read {tmp_path}/nccl_trace_rank_0: is a FIFO, not a regular file",
        f"could not read {tmp_path}/nccl_trace_rank_1: neither JSON nor a readable pickle",
        f"could not read {tmp_path}/nope_: no file starts with nope_",
        "could not read /dev/zero: is a character device, not a regular file",
    ]
    for start in expected:
        assert any(e.startswith(start) for e in read.errors), (start, read.errors)
    dump, error = read_dump_file(str(tmp_path / "nccl_trace_rank_2"), max_bytes=100)
    assert dump is None and "larger than" in error


def test_the_dump_paths_a_job_environment_points_at():
    assert dump_locations({}) == {
        "enabled": False,
        "buffer_size": 0,
        "buffer_from": None,
        "prefix": "/tmp/nccl_trace_rank_",
        "prefix_from": "default",
        "rank": None,
        "file": None,
        "pipe": None,
    }
    env = {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/old/trace_",
        "TORCH_FR_DUMP_TEMP_FILE": "/new/fr_",
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "/run/pipe_",
        "RANK": "3",
    }
    found = dump_locations(env)
    assert (found["enabled"], found["prefix_from"], found["file"], found["pipe"]) == (
        True,
        "TORCH_FR_DUMP_TEMP_FILE",
        "/new/fr_3",
        "/run/pipe_3.pipe",
    )
    del env["TORCH_FR_DUMP_TEMP_FILE"]
    assert dump_locations(env, rank=5)["file"] == "/old/trace_5"
    env["TORCH_FR_BUFFER_SIZE"] = "0"  # read before the old name, as torch does
    assert dump_locations(env)["enabled"] is False and dump_locations(env)["pipe"] is None


def test_json_and_pickle_decode_to_the_same_shape():
    pickled, form = decode_dump((FIXTURE / "nccl_trace_rank_0").read_bytes())
    assert form == "pickle"
    as_json, form = decode_dump((FIXTURE / "json" / "nccl_trace_rank_0.json").read_bytes())
    assert form == "json"
    for key in ("pg_name", "pg_desc", "collective_seq_id", "profiling_name", "input_sizes", "retired"):
        assert [e[key] for e in pickled["entries"]] == [e[key] for e in as_json["entries"]], key
    assert pickled["pg_status"] == as_json["pg_status"]  # the JSON form's strings are numbers again


# --- a dump through the hook, from a job blocked in a collective ---------------------------------


@pytest.mark.timeout(240)
def test_the_hook_writes_the_flight_recorder_on_request_while_a_rank_is_blocked(tmp_path, request):
    from debug_stuck.probes.collectors.hook_dump import find_marker, request_fr_dump

    hook_dir = tmp_path / "hook"
    hook_dir.mkdir(mode=0o700)
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    argv += ["--master_addr=127.0.0.1", f"--master_port={spawn.free_port()}", str(HOOKED)]
    env = {"TORCH_FR_BUFFER_SIZE": "2000", "DEBUG_STUCK_HOOK_DIR": str(hook_dir), "GLOO_SOCKET_IFNAME": "lo"}
    stop = request.addfinalizer
    job = spawn.start(
        "fr-hooked", tmp_path, argv=argv, env=env, ready_timeout=START_SECONDS, on_spawn=lambda j: stop(j.stop)
    )
    wait_for([job.workdir / "rank0.ready", job.workdir / "rank1.ready"], job)
    pids = {rank: job.rank(rank).pid for rank in (0, 1)}
    markers = {}
    for rank, pid in pids.items():
        marker, why = find_marker(pid)
        assert marker is not None, why
        markers[rank] = marker
        data = json.loads(Path(marker.path).read_text())
        assert data["hook"] == 1 and data["fr_dump"] == str(hook_dir / f"{pid}.fr")
    # rank 0 may not be inside the all_reduce yet: ask again until its dump shows it (bounded)
    deadline = time.monotonic() + 60
    while True:
        dumps = {}
        for rank, marker in markers.items():
            path, why = request_fr_dump(marker)
            assert path is not None, why
            assert (os.stat(path).st_mode & 0o777) == 0o600
            dump, error = read_dump_file(path, rank=rank)
            assert dump is not None, error
            dumps[rank] = dump.data
        result = analyze(dumps)
        if result.primary is not None or time.monotonic() > deadline:
            break
    assert result.culprits == [1], result.findings
    problem = result.primary
    assert (problem.kind, problem.seq, problem.sides[0]["op"]) == ("missing", 2, "gloo:all_reduce")
    assert site(problem.sides[0]) == (HOOKED.name, site_line(HOOKED, "hook:hang"))
    assert site(problem.sides[1]) == (HOOKED.name, site_line(HOOKED, "hook:first"))
    assert job.proc.poll() is None, "the job died"


@pytest.mark.timeout(60)
def test_a_hook_installed_without_the_flight_recorder_says_so(tmp_path, monkeypatch, request):
    from debug_stuck.probes.collectors.hook_dump import find_marker, request_fr_dump

    monkeypatch.setenv("DEBUG_STUCK_HOOK_DIR", str(tmp_path))
    monkeypatch.delenv("TORCH_FR_BUFFER_SIZE", raising=False)
    monkeypatch.delenv("TORCH_NCCL_TRACE_BUFFER_SIZE", raising=False)
    argv = [sys.executable, str(TARGETS / "hooked_job.py"), "--stay-dumpable"]
    stop = request.addfinalizer
    job = spawn.start("hooked-no-fr", tmp_path, argv=argv, stdout="pipe", on_spawn=lambda j: stop(j.stop))
    assert job.proc.stdout.readline().strip() == b"ready"
    marker, why = find_marker(job.proc.pid)
    assert marker is not None, why
    path, why = request_fr_dump(marker)
    assert path is None and "offers no Flight Recorder dump" in why
    assert not list(tmp_path.glob("*.frreq"))


@pytest.mark.timeout(60)
def test_a_job_with_the_flight_recorder_on_but_no_torch_loaded_gets_the_reason(tmp_path, monkeypatch, request):
    from debug_stuck.probes.collectors.hook_dump import find_marker, request_fr_dump

    monkeypatch.setenv("DEBUG_STUCK_HOOK_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "2000")
    argv = [sys.executable, str(TARGETS / "hooked_job.py"), "--stay-dumpable"]
    job = spawn.start(
        "hooked-no-torch", tmp_path, argv=argv, stdout="pipe", on_spawn=lambda j: request.addfinalizer(j.stop)
    )
    assert job.proc.stdout.readline().strip() == b"ready"
    marker, why = find_marker(job.proc.pid)
    assert marker is not None, why
    reason = "RuntimeError: torch.distributed is not loaded in the job (yet)"
    for _ in range(2):  # the thread serves one request after another
        path, why = request_fr_dump(marker)
        assert (path, why) == (None, f"the hook could not dump the Flight Recorder: {reason}")
    assert job.proc.poll() is None


# --- NCCL dumps (no GPU here: built in the 2.10 layout NCCL writes, the hardware seam) -----------


def nccl_dump(ranks, entries, pg_status=None):
    """A rank's dump as ProcessGroupNCCL writes it: pg_config names the members, states advance."""
    config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(ranks))}}
    frames = [
        {"name": "all_reduce", "filename": "/venv/site-packages/torch/distributed/distributed_c10d.py", "line": 3245},
        {"name": "train_step", "filename": "/home/u/train.py", "line": 88},
    ]
    made = []
    for record_id, (seq, name, state, sizes, dtype) in enumerate(entries):
        made.append(
            {
                "record_id": record_id,
                "pg_id": 0,
                "process_group": ("0", "default_pg"),
                "collective_seq_id": 0 if " " in name else seq,
                "p2p_seq_id": seq if " " in name else 0,
                "is_p2p": " " in name,
                "op_id": record_id + 1,
                "profiling_name": name,
                "input_sizes": sizes,
                "output_sizes": sizes,
                "input_dtypes": [dtype],
                "output_dtypes": [dtype],
                "state": state,
                "retired": state == "completed",
                "time_created_ns": 1000 + record_id,
                "frames": frames,
            }
        )
    return {"version": "2.10", "entries": made, "pg_config": config, "pg_status": pg_status or {}}


def test_a_rank_with_no_collective_at_all_never_joined_and_nccl_points_at_init():
    result = analyze(
        {
            0: nccl_dump([0, 1], [(1, "nccl:all_reduce", "scheduled", [[4]], "Float")]),
            1: nccl_dump([0, 1], []),
        }
    )
    assert (result.culprits, result.culprit_state, result.cause) == ([1], "never-joined", "nccl-init")
    assert "rank 1 issued no collective at all" in result.findings[0]
    assert "train.py:88 (train_step)" in result.findings[0]


def test_ranks_all_waiting_with_a_dump_missing_point_at_the_rank_without_one():
    entry = [(1, "nccl:all_reduce", "completed", [[4]], "Float"), (2, "nccl:all_reduce", "started", [[4]], "Float")]
    result = analyze({0: nccl_dump([0, 1, 2], entry), 1: nccl_dump([0, 1, 2], entry)})
    assert result.primary.kind == "not-completed" and result.primary.seq == 2
    assert (result.culprits, result.culprit_state, result.no_dump) == ([2], "no-dump", [2])
    assert "no dump from rank 2: its side is unknown" in result.findings


def test_completed_on_one_rank_only_and_a_dtype_mismatch():
    done = [(1, "nccl:all_reduce", "completed", [[4]], "Float")]
    stuck = [(1, "nccl:all_reduce", "started", [[4]], "Float")]
    result = analyze({0: nccl_dump([0, 1], done), 1: nccl_dump([0, 1], stuck)})
    assert (result.primary.kind, result.culprits) == ("state-mismatch", [1])
    half = [(1, "nccl:all_reduce", "started", [[4]], "Half")]
    result = analyze({0: nccl_dump([0, 1, 2], stuck), 1: nccl_dump([0, 1, 2], half), 2: nccl_dump([0, 1, 2], stuck)})
    assert (result.primary.kind, result.culprits) == ("dtype-mismatch", [1])


def test_pending_point_to_point_ops_are_listed():
    result = analyze(
        {
            0: nccl_dump([0, 1], [(1, "nccl:send 0->1", "scheduled", [[4]], "Float")]),
            1: nccl_dump([0, 1], []),
        }
    )
    assert (
        "rank 0 has nccl:send 0->1 (p2p #1) pending on pg 0 (default_pg) at train.py:88 (train_step)" in result.findings
    )


# --- a real NCCL dump: one rank on an H200, an all_reduce queued behind GPU work ------------------


def test_a_real_nccl_dump_reads_and_names_the_collective_that_never_started():
    folder = FIXTURE / "nccl_h200"
    for paths, form in (([str(folder)], "pickle"), ([str(folder / "json")], "json")):
        read = read_flight_recorder(paths)
        assert not read.errors, read.errors
        [dump] = read.dumps
        assert (dump.rank, dump.form, dump.data["version"]) == (0, form, "2.10")
        ops = [(e["profiling_name"], e["collective_seq_id"], e["state"]) for e in dump.data["entries"]]
        assert ops == [("nccl:all_reduce", n, "completed") for n in (1, 2, 3)] + [
            ("nccl:broadcast", 4, "completed"),
            ("nccl:all_reduce", 5, "scheduled"),
        ]
        result = analyze(read.by_rank())
        assert result.primary.kind == "not-completed" and result.primary.seq == 5
        assert result.culprits == []  # one rank: nobody to blame but the GPU work ahead of it
        assert "nccl:all_reduce #5" in result.primary.line
    pickled = read_flight_recorder([str(folder)]).dumps[0].data
    assert pickled["comm_lib_version"] == "2.28.9"  # NCCL's own version, from the CUDA build
    site = pickled["entries"][-1]["frames"]
    assert any(f["filename"].endswith("gpu_check.py") for f in site)
