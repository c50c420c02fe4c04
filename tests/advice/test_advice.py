"""Advice for this job: placeholders filled from the report, fixes chosen by the job's framework and
command, checks that would disturb the stuck job held back, and edits to the user's own code."""

from __future__ import annotations

import ast
import os
import shlex
from pathlib import Path

import pytest

from debug_stuck.actions.edits import apply_edit
from debug_stuck.advice import personalize
from debug_stuck.advice.applies import APPLIES, CONDITIONAL, NOT_HERE, judge
from debug_stuck.advice.edits import edit_at
from debug_stuck.advice.facts import gather_facts
from debug_stuck.advice.fill import fill, placeholders_in
from debug_stuck.contract import FIX_CONTEXT, PLACEHOLDERS, SAFETY_LABELS
from debug_stuck.core.report import CheckItem, Diagnosis, FixItem, Report, safety_dict


def test_fill_quotes_paths_for_the_shell_and_leaves_other_braces_alone():
    values = {"pid": "4242", "log": "/data/my run/train.log", "rank_pids": "11 12"}
    text = 'py-spy dump --pid {pid}; tail {log}; for p in {rank_pids}; do echo "$p" "{log}"; done; awk \'{print $2}\''
    filled, unfilled = fill(text, values, "bash")
    assert unfilled == []
    assert "--pid 4242" in filled and "tail '/data/my run/train.log'" in filled
    assert "for p in 11 12;" in filled and '"/data/my run/train.log"' in filled
    assert "{print $2}" in filled
    assert shlex.split(filled.split(";")[1]) == ["tail", "/data/my run/train.log"]


def test_fill_marks_what_it_cannot_know_and_keeps_literals():
    filled, unfilled = fill("ls {output_dir} {{pid}} f'{i}' {checkpoint}", {}, "python")
    assert unfilled == ["output_dir", "checkpoint"]
    assert "{output_dir}" in filled and "{pid}" in filled and "{{pid}}" not in filled and "{i}" in filled
    assert placeholders_in("{pid} {main_pid} {nope}") == ["pid", "main_pid"]


@pytest.mark.parametrize(
    "applies, flag, context, argv, expected",
    [
        ({"framework": ["kohya"]}, None, {"framework": "pytorch"}, ["python", "t.py"], NOT_HERE),
        ({"framework": ["kohya"]}, None, {"framework": "kohya"}, ["accelerate", "launch", "x.py"], APPLIES),
        ({"framework": ["kohya"]}, None, {}, [], CONDITIONAL),
        ({}, "--num-workers", {}, ["python", "t.py", "--lr", "1"], NOT_HERE),
        ({}, "--num-workers", {}, ["python", "t.py", "--num_workers", "8"], APPLIES),
        ({}, "--num-workers", {}, [], CONDITIONAL),
        ({"platform": ["rocm"]}, None, {"platform": "cpu"}, [], NOT_HERE),
        ({"reader": ["stopped"]}, None, {"reader": "running"}, [], NOT_HERE),
        ({"reader": ["stopped"]}, None, {"reader": "stopped"}, [], APPLIES),
        ({"reader": ["stopped"]}, None, {}, [], CONDITIONAL),
    ],
)
def test_fixes_apply_by_framework_platform_and_the_commands_own_flags(applies, flag, context, argv, expected):
    verdict, why = judge(applies, flag, context, argv)
    assert verdict == expected
    if expected == CONDITIONAL:
        assert why.startswith(("if ", "on ", "for "))


def test_py_spy_never_pauses_a_process_with_a_write_part_way():
    from debug_stuck.advice.fill import without_a_pause

    text = "py-spy dump --native --pid 41\npy-spy dump --locals --pid 42\npy-spy top --pid=41 --native"
    assert without_a_pause(text, {41}).split("\n") == [
        "py-spy dump --nonblocking --pid 41",
        "py-spy dump --locals --pid 42",
        "py-spy top --nonblocking --pid=41",
    ]
    assert without_a_pause("py-spy dump --nonblocking --pid 41", {41}) == "py-spy dump --nonblocking --pid 41"


def test_a_framework_the_job_uses_makes_its_fix_apply_and_a_library_never_seen_keeps_it_conditional():
    # checkpoints plain PyTorch, but the job calls accelerate: accelerate's fix is for it
    accelerate = {"framework": ["accelerate"]}
    assert judge(accelerate, None, {"framework": "pytorch"}, [])[0] == NOT_HERE
    assert judge(accelerate, None, {"framework": "pytorch"}, [], {"accelerate"})[0] == APPLIES
    wandb = {"uses": ["wandb"]}
    assert judge(wandb, None, {}, [], {"wandb"}) == (APPLIES, None)
    assert judge(wandb, None, {"framework": "pytorch"}, [], {"huggingface_hub"}) == (
        CONDITIONAL,
        "if your job uses wandb",
    )


@pytest.mark.parametrize(
    "frame, library",
    [
        # a package installed outside site-packages (pip --target, PYTHONPATH): py-spy names it from
        # the sys.path entry it was imported from
        ({"file": "wandb/sdk/lib/asyncio_manager.py", "path": "/tmp/pkgs/wandb/sdk/lib/asyncio_manager.py"}, True),
        ({"file": "threading.py", "path": "/usr/lib/python3.11/threading.py"}, True),
        # a script run from a library's checkout is named from its own folder: the job's own code
        ({"file": "run_glue.py", "path": "/home/me/transformers/examples/pytorch/run_glue.py"}, False),
        ({"file": "train.py", "path": "/home/me/proj/train.py"}, False),
        ({"file": "models/net.py", "path": "/home/me/proj/models/net.py"}, False),
        # a project's own datasets/ package (DETR's), under the folder of the job's script
        ({"file": "datasets/coco.py", "path": "/home/me/detr/datasets/coco.py"}, False),
    ],
)
def test_library_frames_are_told_by_where_they_were_imported_from(frame, library):
    from debug_stuck.advice.facts import is_library_frame, own_code_roots

    main = {"function": "<module>", "file": "main.py", "path": "/home/me/detr/main.py", "line": 3}
    processes = [{"pid": 1, "threads": [{"tid": 1, "frames": [frame, main]}]}]
    assert own_code_roots(processes) == ["/home/me/detr"]
    assert is_library_frame(frame, own_code_roots(processes)) is library


def test_a_pasted_wandb_dump_gets_the_wandb_fix_first(tmp_path, cli_json):
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "wandb"
    report = cli_json("--log", fixtures / "init-silent-server.pyspy.txt", "--log", fixtures / "init-silent-server.log")
    first = report["diagnoses"][0]
    assert first["cause"] == "external-service", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    assert "wandb" in report["logs"][0]["libraries"]
    titles = [(f["title"], f.get("condition")) for f in first["fixes"]]
    assert titles[0] == ("Run the tracker offline, sync later", None), titles
    hub_fix = "Use local copies of models and datasets on the compute nodes"
    assert (hub_fix, "if your job uses huggingface_hub") in titles


def test_a_pasted_pdb_prompt_gets_the_debuggers_fix_first_and_the_trackers_config_answer_last(cli_json):
    # wandb's key, the Hub's token and trust_remote_code answer those libraries' prompts, not pdb's
    dump = Path(__file__).resolve().parents[1] / "fixtures" / "stacks" / "pdb-breakpoint-py-spy.txt"
    report = cli_json("--log", dump)
    assert report["logs"][0]["stack_facts"] == ["debugger", "stdin"], report["logs"][0]
    assert report["job"]["context"]["stopped_in"] == "debugger", report["job"]
    first = report["diagnoses"][0]
    assert first["cause"] == "input-wait", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    titles = [(f["title"], f.get("condition")) for f in first["fixes"]]
    assert titles[0] == ("Continue past the breakpoint() left in the code", None), titles
    assert "export PYTHONBREAKPOINT=0" in "\n".join(first["fixes"][0]["commands"])
    config = "Answer the question in the configuration, not at the keyboard"
    conditional = [t for t in titles if t[1]]  # kept last, each on its condition
    assert (
        titles[-len(conditional) :] == conditional
        and (config, "if your job uses wandb, huggingface_hub or transformers") in conditional
    ), titles


@pytest.mark.parametrize(
    "frames, stopped_in",
    [
        ([("interaction", "pdb.py"), ("cmdloop", "cmd.py"), ("train", "train.py")], "debugger"),
        ([("_raw_input", "getpass.py"), ("login", "wandb/sdk/wandb_login.py")], "elsewhere"),
        ([], None),
    ],
)
def test_the_debuggers_fix_is_for_a_job_whose_stacks_stop_in_pdb(frames, stopped_in):

    report = Report()
    threads = [{"tid": 7, "frames": [{"function": f, "file": file} for f, file in frames]}] if frames else []
    report.processes = [{"pid": 7, "ppid": 1, "role": "rank", "cmdline": "python train.py", "threads": threads}]
    facts = gather_facts(report)
    assert facts.context.get("stopped_in") == stopped_in, facts.context
    verdict, why = judge({"stopped_in": ["debugger"]}, None, facts.context, facts.argv, facts.uses)
    expected = {"debugger": APPLIES, "elsewhere": NOT_HERE, None: CONDITIONAL}[stopped_in]
    assert verdict == expected, why


def _report_for(fixes, checks, **job):
    report = Report()
    report.processes = [
        {
            "pid": 900,
            "ppid": 1,
            "role": "launcher",
            "cmdline": "torchrun --nproc_per_node 2 train.py --num_workers 8",
            "threads": [],
        },
        {"pid": 901, "ppid": 900, "role": "rank", "cmdline": "python train.py", "threads": []},
        {"pid": 902, "ppid": 900, "role": "rank", "cmdline": "python train.py", "threads": []},
    ]
    report.resume = {"framework": "pytorch", "cwd": job.get("cwd", "/tmp"), "command": None}
    report.chain = job.get("chain", [])
    report.diagnoses = [
        Diagnosis(
            cause="dataloader",
            title="t",
            confidence=0.9,
            evidence=[],
            fixes=fixes,
            playbook="skills/dataloader.md",
            check_items=checks,
            checks=[c.command for c in checks],
        )
    ]
    return report


def test_personalize_fills_pids_sets_the_jobs_own_flag_and_drops_fixes_for_other_frameworks(tmp_path):
    fixes = [
        FixItem(
            "Turn off block swapping (sd-scripts)", ["--blocks_to_swap 0"], ["bash"], applies={"framework": ["kohya"]}
        ),
        FixItem(
            "Triage with no worker processes",
            ["{launch_command} --num-workers 0"],
            ["bash"],
            [safety_dict("config")],
            flag="--num-workers",
        ),
    ]
    checks = [
        CheckItem("py-spy dump --pid {main_pid}\nfor p in {rank_pids}; do echo $p; done", "bash", safety_dict("reads"))
    ]
    report = _report_for(fixes, checks, cwd=str(tmp_path))
    personalize(report)
    top = report.diagnoses[0]
    assert [f.title for f in top.fixes] == ["Triage with no worker processes"]
    assert top.fixes_left_out[0]["title"].startswith("Turn off block swapping")
    assert top.fixes[0].commands == ["torchrun --nproc_per_node 2 train.py --num_workers 0"]
    assert top.checks[0].startswith("py-spy dump --pid 900\nfor p in 901 902;")
    assert report.job["values"]["nproc"] == "2"


def test_a_check_that_opens_the_file_the_job_is_blocked_on_is_held_back(tmp_path):
    fifo = str(tmp_path / "ckpt.pt")
    chain = [{"pid": 901, "terminal": True, "waits_on": {"kind": "fifo", "object": fifo, "detail": "open()"}}]
    checks = [
        CheckItem(
            "python -c 'import zipfile,sys; zipfile.ZipFile(sys.argv[1])' {blocked_path}",
            "bash",
            safety_dict("disturbs", "opens it"),
        ),
        CheckItem("ls -l {blocked_path}", "bash", safety_dict("reads")),
    ]
    report = _report_for([], checks, cwd=str(tmp_path), chain=chain)
    personalize(report)
    first, second = report.diagnoses[0].check_items
    assert first.command == f"ls -l {fifo}" and first.withheld is None
    assert second.withheld and fifo in second.withheld


DATALOADER_RULE = {"call": "DataLoader", "keyword": "timeout", "value": "600", "why": "w", "anywhere": True}


@pytest.mark.parametrize(
    "source, expected_call",
    [
        ("loader = DataLoader(ds, batch_size=4)\n", "loader = DataLoader(ds, batch_size=4, timeout=600)\n"),
        ("loader = DataLoader()\n", "loader = DataLoader(timeout=600)\n"),
        (
            "loader = DataLoader(\n    ds,\n    batch_size=4,\n)\n",
            "loader = DataLoader(\n    ds,\n    batch_size=4,\n    timeout=600,\n)\n",
        ),
        (
            "x = 'é'; loader = torch.utils.data.DataLoader(ds)\n",
            "x = 'é'; loader = torch.utils.data.DataLoader(ds, timeout=600)\n",
        ),
    ],
)
def test_keyword_edits_keep_the_code_valid(tmp_path, source, expected_call):
    path = tmp_path / "train.py"
    path.write_text(source)
    edit = edit_at("dataloader", 0, DATALOADER_RULE, str(path), source, None)
    assert edit is not None and edit.new_text == expected_call
    ast.parse(edit.new_text)
    assert edit.diff.startswith("--- a/train.py\n+++ b/train.py\n")


def test_a_call_that_already_has_the_keyword_needs_no_edit(tmp_path):
    source = "loader = DataLoader(ds, timeout=30)\n"
    assert edit_at("dataloader", 0, DATALOADER_RULE, str(tmp_path / "t.py"), source, None) is None


def test_statement_and_wrap_edits_add_their_imports(tmp_path):
    save = {
        "call": "torch.save",
        "replace": '_tmp = str({arg1}) + ".tmp"\n{call}({arg0}, _tmp)\nos.replace(_tmp, {arg1})',
        "imports": ["os"],
        "why": "w",
    }
    source = '"""doc"""\nimport torch\n\n\ndef save(m, path):\n    torch.save(m.state_dict(), path)\n'
    edit = edit_at("checkpoint-save", 0, save, str(tmp_path / "t.py"), source, 6)
    assert edit is not None
    assert "    torch.save(m.state_dict(), _tmp)\n    os.replace(_tmp, path)\n" in edit.new_text
    assert edit.new_text.startswith('"""doc"""\nimport os\nimport torch')
    ast.parse(edit.new_text)
    wrap = {"call": "input", "wrap": '({call} if sys.stdin.isatty() else "")', "imports": ["sys"], "why": "w"}
    source = "answer = input('continue? ')\n"
    edit = edit_at("input-wait", 0, wrap, str(tmp_path / "t.py"), source, 1)
    assert edit.new_text == "import sys\nanswer = (input('continue? ') if sys.stdin.isatty() else \"\")\n"


def test_a_save_into_a_file_a_with_opened_gets_no_rename_edit(tmp_path, knowledge):
    # the sixth hunt's healthy_gzip_ckpt_join: `torch.save(state, fh)` into `gzip.open(tmp)`, renamed
    # after the with; the playbook's edit made `str(fh) + ".tmp"` of the file object (it raised)
    (rule,) = [r for r in knowledge.playbooks["checkpoint-save"].edits if r["call"] == "torch.save"]
    source = (
        "import gzip, os, torch\n\n\ndef save_compressed(state, path):\n    tmp = path + '.tmp'\n"
        "    with gzip.open(tmp, 'wb', compresslevel=9) as fh:\n        torch.save(state, fh)\n"
        "    os.replace(tmp, path)\n"
    )
    assert edit_at("checkpoint-save", 0, rule, str(tmp_path / "train.py"), source, 7) is None
    plain = "import torch\n\n\ndef save(state, path):\n    torch.save(state, path)\n"
    assert edit_at("checkpoint-save", 0, rule, str(tmp_path / "train.py"), plain, 5) is not None


def test_apply_refuses_a_file_changed_since_the_report(tmp_path, knowledge):
    rules = knowledge.playbooks["dataloader"].edits
    assert rules, "the dataloader playbook declares its code edit"
    path = tmp_path / "train.py"
    path.write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=2)\n")
    edit = edit_at("dataloader", 0, rules[0], str(path), path.read_text(), None)
    diff, new_text = apply_edit(edit.to_dict(), knowledge)
    assert "timeout=" in new_text and diff == edit.diff
    path.write_text(path.read_text() + "# changed\n")
    with pytest.raises(ValueError, match="changed since the report"):
        apply_edit(edit.to_dict(), knowledge)


def test_the_vocabularies_are_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "contract.md").read_text()
    for name in list(SAFETY_LABELS) + list(PLACEHOLDERS) + list(FIX_CONTEXT):
        assert f"`{name}`" in doc, name


def test_fix_apply_writes_the_edit_with_a_backup_once_the_job_is_gone(tmp_path, cli, knowledge):
    import json

    script = tmp_path / "train.py"
    script.write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=2)\n")
    rule = knowledge.playbooks["dataloader"].edits[0]
    edit = edit_at("dataloader", 0, rule, str(script), script.read_text(), None)
    saved = tmp_path / "report.json"
    saved.write_text(
        json.dumps({"verdict": {"summary": "s"}, "diagnoses": [], "processes": [], "edits": [edit.to_dict()]})
    )
    code, out, err = cli("fix", "--report", str(saved), "--apply")
    assert code == 2 and "--yes" in err  # no terminal, no consent: nothing written
    assert "timeout" not in script.read_text()
    code, out, err = cli("fix", "--report", str(saved), "--apply", "--yes")
    assert code == 0, err
    assert script.read_text().endswith("DataLoader(ds, num_workers=2, timeout=600)\n")
    backups = list(tmp_path.glob("train.py.bak-*"))
    assert len(backups) == 1 and "timeout" not in backups[0].read_text()
    code, out, err = cli("fix", "--report", str(saved), "--apply", "--yes")
    assert code == 2 and "changed since the report" in err


def test_the_report_does_not_ask_what_the_answers_already_settle(cli_json):
    report = cli_json("--answer", "phase=mid-run", "--answer", "platform=cpu", "--answer", "step=unknown")
    assert report["answers"]["gpu"]["value"] == "none" and "platform is cpu" in report["answers"]["gpu"]["why"]
    assert "gpu" not in [q["key"] for q in report["next_questions"]]
    assert report["pattern"] is None and report["pattern_reason"] == "not named: step, cpu are unknown"
    triage = next(e["detail"] for d in report["diagnoses"] for e in d["evidence"] if e["source"] == "answer")
    assert "step unknown" in triage and "step=random" not in triage


def test_a_relative_script_stays_as_typed_when_the_jobs_folder_is_unknown(tmp_path, monkeypatch):
    # a report from a log or another machine: the tool's own folder holds a file of the same name,
    # which must neither be named as the job's script nor read to tell its framework
    (tmp_path / "train.py").write_text("import lightning\n")
    monkeypatch.chdir(tmp_path)
    fixes = [FixItem("Run it again", ["{python} {script}"], ["bash"], [safety_dict("runs-code")])]
    report = _report_for(fixes, [])
    report.resume = {}
    report.processes[0]["cmdline"] = "python train.py"
    report.processes = report.processes[:1]
    personalize(report)
    assert report.job["values"]["script"] == "train.py"
    assert report.job["context"].get("framework") != "lightning"
    assert report.diagnoses[0].fixes[0].commands == ["python train.py"]


def test_a_fix_heading_says_nothing_runs_now_once():
    from debug_stuck.render.advice import fix_heading

    fix = FixItem("Bound the wait", ["x", "y"], ["python", "bash"], [safety_dict("edit"), safety_dict("config")])
    assert fix_heading(fix) == "Bound the wait [an edit to your code; a setting for the next run; nothing runs now]"
    mixed = FixItem("Rerun", ["x", "y"], ["python", "bash"], [safety_dict("edit"), safety_dict("runs-code")])
    assert fix_heading(mixed) == "Rerun [an edit to your code; runs your code]"


VALID = "/runs/exp/ckpt_000005.pt"


@pytest.mark.parametrize(
    "command, cwd, touches",
    [
        (f"rm {VALID}", None, True),
        ("rm ckpt_000005.pt", "/runs/exp", True),  # relative to the job's folder
        ("rm ckpt_*.pt", "/runs/exp", True),  # a glob that matches it
        ("rm ckpt_*.pt", None, True),  # no folder known: a name that matches it counts
        ("cd /runs/exp && rm ckpt_000005.pt", None, True),
        ("cd /runs && rm -r exp", None, True),  # the folder that holds it
        ("rm -rf /runs", None, True),
        ("mv /runs/exp/ckpt_000010.pt /runs/exp/ckpt_000010.pt.partial", None, False),  # the partial one
        ("rm ckpt_000010.pt", "/runs/exp", False),
        ("rm other/ckpt_000005.pt", "/elsewhere", False),
        ("ls /runs/exp", None, False),  # reads, moves nothing
    ],
)
def test_a_command_that_would_move_or_remove_the_valid_checkpoint_is_recognised(command, cwd, touches):
    from debug_stuck.advice import endangers

    assert endangers(command, VALID, cwd) is touches


TF_LOG = (
    "I tensorflow/core/common_runtime/gpu/gpu_device.cc:1886] Created device /job:localhost/replica:0/task:0/"
    "device:GPU:0 with 38249 MB memory:  -> device: 0, name: NVIDIA A100-SXM4-40GB, pci bus id: 0000:07:00.0, "
    "compute capability: 8.0\n"
    "I tensorflow/core/kernels/data/shuffle_dataset_op.cc:422] Filling up shuffle buffer (this may take a while): "
    "1953 of 50000\n"
)


JAX_CONNECT = "I0611 10:00:00.000000 1 distributed.py:90] Connecting to JAX distributed service on 10.0.0.1:1234"


def diagnose_log(cli_json, tmp_path, *lines, answers=()):
    """The scripted mode's JSON report for a log of these lines (and these triage answers)."""
    log = tmp_path / "train.log"
    log.write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines), encoding="utf-8")
    flags = [flag for answer in answers for flag in ("--answer", answer)]
    return cli_json("--log", log, *flags)


def test_a_tensorflow_job_gets_no_fix_that_calls_torch(cli_json, tmp_path):
    report = diagnose_log(cli_json, tmp_path, TF_LOG)
    assert report["job"]["context"]["stack"] == "tensorflow", report["job"]
    top = report["diagnoses"][0]
    assert top["cause"] == "dataloader"
    assert top["fixes"][0]["title"].startswith("Time the input pipeline alone"), [f["title"] for f in top["fixes"]]
    assert not any("torch" in command for fix in top["fixes"] for command in fix["commands"]), top["fixes"]
    left_out = {f["title"]: f["why"] for f in top["fixes_left_out"]}
    assert left_out["Make a stuck loader fail instead of hanging"] == "for torch; this job: tensorflow"


def test_a_torch_job_gets_no_tensorflow_fix(cli_json, tmp_path):
    report = diagnose_log(
        cli_json,
        tmp_path,
        "[rank0]: DataLoader worker (pid 4242) is killed by signal: Killed.",
        '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1134, in _try_get_data',
    )
    assert report["job"]["context"]["stack"] == "torch"
    top = report["diagnoses"][0]
    assert top["cause"] == "dataloader"
    titles = [f["title"] for f in top["fixes"]]
    assert not any("tf.data" in title for title in titles), titles
    assert titles[0] == "Make a stuck loader fail instead of hanging", titles


def test_a_jax_job_fed_by_tf_data_is_a_jax_job(cli_json, tmp_path):
    report = diagnose_log(cli_json, tmp_path, JAX_CONNECT, TF_LOG.splitlines()[-1])
    assert report["job"]["context"]["stack"] == "jax", report["job"]
    titles = [f["title"] for d in report["diagnoses"] for f in d["fixes"]]
    assert "Time the input pipeline alone, and shrink its shuffle buffer (tf.data)" in titles


def test_with_nothing_to_tell_the_library_torch_is_presumed_and_said_so(cli_json, tmp_path):
    answers = ("phase=mid-run", "gpu=idle", "cpu=idle")
    report = diagnose_log(cli_json, tmp_path, "epoch 3 step 1200 loss 0.53", answers=answers)
    assert "stack" not in report["job"]["context"], report["job"]
    dataloader = next(d for d in report["diagnoses"] if d["cause"] == "dataloader")
    assert dataloader["fixes"][0]["title"] == "Make a stuck loader fail instead of hanging"
    left_out = {f["title"]: f["why"] for f in dataloader["fixes_left_out"]}
    why = left_out["Time the input pipeline alone, and shrink its shuffle buffer (tf.data)"]
    assert why == "for tensorflow or jax; this job's library is not known (torch presumed)"


def test_a_jax_compile_gets_the_xla_fix_not_torch_compiles(cli_json, tmp_path):
    report = diagnose_log(
        cli_json,
        tmp_path,
        JAX_CONNECT,
        "E0611 10:09:44.201339 4123 slow_operation_alarm.cc:65]",
        "********************************",
        "[Compiling module jit_train_step] Very slow compile? If you want to file a bug, run with envvar "
        "XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.",
        "********************************",
    )
    assert report["job"]["context"]["stack"] == "jax"
    top = report["diagnoses"][0]
    assert top["cause"] == "compile", [(d["cause"], d["confidence"]) for d in report["diagnoses"]]
    assert top["fixes"][0]["title"].startswith("Cache JAX's compiled programs"), [f["title"] for f in top["fixes"]]
    left_out = {f["title"] for f in top["fixes_left_out"]}
    assert "Compile in-process (no worker pool)" in left_out  # TORCHINDUCTOR_* is PyTorch's own setting


def test_the_library_the_job_runs_tells_its_stack_before_what_its_script_imports(tmp_path):
    # a script that imports torch and jax, caught in jax.distributed (as bench/gpu_check.py's jax_init job
    # on an H100: tests/fixtures/gpu/h100/jax_init-py-spy.txt): the running frames are jax's
    from types import SimpleNamespace

    from debug_stuck.advice.facts import _frame_paths, _stack
    from debug_stuck.recovery.job import TrainingJob

    script = tmp_path / "train.py"
    script.write_text("import torch\nimport jax\n", encoding="utf-8")
    job = TrainingJob(["python", str(script)], str(tmp_path), {})
    frame = {"function": "State.initialize", "file": "jax/_src/distributed.py", "line": 218}
    running = [{"pid": 852, "threads": [{"tid": 852, "frames": [frame]}]}]
    report = SimpleNamespace(logs=[])
    assert _stack(report, _frame_paths(running), job) == "jax"
    # no frames: the imports, in table order
    assert _stack(report, _frame_paths([{"pid": 852, "threads": []}]), job) == "torch"
    logged = SimpleNamespace(logs=[{"libraries": ["tensorflow"]}])
    assert _stack(logged, _frame_paths([{"pid": 852, "threads": []}]), None) == "tensorflow"


def test_a_pasted_jax_dump_gets_the_jax_rendezvous_fix(cli_json):
    # py-spy of process 0 in jax.distributed.initialize() on an H100 (tests/fixtures/gpu/h100): the
    # frames are jax's, so MASTER_PORT (torch's) is not its fix, the coordinator is
    from pathlib import Path

    dump = Path(__file__).parents[1] / "fixtures" / "gpu" / "h100" / "jax_init-py-spy.txt"
    report = cli_json("--log", dump)
    assert report["logs"][0]["libraries"] == ["jax"]
    assert report["job"]["context"]["stack"] == "jax"
    top = report["diagnoses"][0]
    assert top["cause"] == "rendezvous"
    titles = [f["title"] for f in top["fixes"]]
    assert "Give every JAX process the same coordinator, and fail fast" in titles, titles
    assert {f["title"]: f["why"] for f in top["fixes_left_out"]}["Use a free port"] == "for torch; this job: jax"


def test_a_jax_collective_gets_jaxs_fix_and_none_of_the_torch_frameworks(cli_json):
    # process 0 in multihost_utils.sync_global_devices, process 1 elsewhere (tests/fixtures/jax): the
    # HF Trainer's, accelerate's and kohya's timeouts are torch frameworks' (the stacks table's
    # `frameworks`), so they are left out with the reason
    from pathlib import Path

    dump = Path(__file__).parents[1] / "fixtures" / "jax" / "multihost-sync-py-spy.txt"
    top = cli_json("--log", dump)["diagnoses"][0]
    assert top["cause"] == "collective"
    assert top["fixes"][0]["title"] == "Make every JAX process run the same computations, in the same order"
    left_out = {f["title"]: f["why"] for f in top["fixes_left_out"]}
    for title in (
        "Set the process-group timeout through accelerate",
        "Set the process-group timeout through the HF Trainer",
    ):
        assert left_out[title] == "for torch; this job: jax", left_out


@pytest.mark.parametrize(
    "env, frame, backend",
    [
        ({"NCCL_VERSION": "2.28.3-1"}, "barrier", None),  # NVIDIA's CUDA images set it in every process
        ({"NCCL_VERSION": "2.28.3-1", "NCCL_DEBUG": "INFO"}, "barrier", "nccl"),  # a setting of the job's own
        ({"NCCL_VERSION": "2.28.3-1"}, "c10d::ProcessGroupNCCL::allreduce", "nccl"),  # its frames say so
    ],
)
def test_the_backend_is_the_jobs_setting_or_frames_not_the_images_nccl_version(env, frame, backend):
    # gloo ranks in NVIDIA's container on an H100 (tests/fixtures/gpu/h100/eval_while_waiting-report.json,
    # as recorded before the fix) were told NCCL's fixes: the image's NCCL_VERSION was read as the backend
    from debug_stuck.advice.facts import gather_facts

    report = Report()
    report.processes = [
        {
            "pid": 776,
            "role": "rank",
            "cmdline": "python train.py",
            "env": env,
            "threads": [{"tid": 776, "frames": [{"function": frame, "file": "torch/distributed/distributed_c10d.py"}]}],
        }
    ]
    assert gather_facts(report).context.get("backend") == backend


def test_the_hf_trainer_gets_its_own_workers_flag_with_its_value_replaced(tmp_path):
    """A Hugging Face Trainer job whose command sets --dataloader_num_workers: the dataloader
    playbook's triage runs its own command with that option at 0 (not a --num-workers it lacks)."""
    from debug_stuck.core.classify import fix_item
    from debug_stuck.kb import load_knowledge

    fixes = [fix_item(fix) for fix in load_knowledge().playbooks["dataloader"].fixes]
    report = _report_for(fixes, [], cwd=str(tmp_path))
    report.processes = [
        {
            "pid": 900,
            "ppid": 1,
            "role": "rank",
            "cmdline": "python train.py --output_dir out --dataloader_num_workers 2 --max_steps 50",
            "threads": [],
        }
    ]
    report.resume["framework"] = "hf-trainer"
    personalize(report)
    top = report.diagnoses[0]
    kept = {f.title: f.commands for f in top.fixes}
    assert kept["Triage with --dataloader_num_workers 0"] == [
        "python train.py --output_dir out --max_steps 50 --dataloader_num_workers 0"
    ], kept
    left_out = [f["title"] for f in top.fixes_left_out]
    assert "Triage with no worker processes" in left_out and "Triage with --max_data_loader_n_workers 0" in left_out


@pytest.mark.parametrize(
    "rename",
    ["os.replace(path + '.tmp', path)", "os.rename(path + '.tmp', path)", "(path + '.tmp').replace(path)"],
)
def test_a_save_already_renamed_into_place_gets_no_temporary_file_edit(tmp_path, rename):
    save = {"call": "torch.save", "replace": '_tmp = str({arg1}) + ".tmp"\n{call}({arg0}, _tmp)', "why": "w"}
    source = f"import os, torch\n\n\ndef save(m, path):\n    torch.save(m, path + '.tmp')\n    {rename}\n"
    assert edit_at("checkpoint-save", 0, save, str(tmp_path / "t.py"), source, 5) is None
    other = source.replace(rename, "os.replace(other, path)")
    assert edit_at("checkpoint-save", 0, save, str(tmp_path / "t.py"), other, 5) is not None


@pytest.mark.parametrize("ranks, workers", [(1, 0), (2, 2), (64, 0)])
def test_thread_limits_share_the_jobs_cpus_among_its_ranks_and_workers(ranks, workers):
    """OMP_NUM_THREADS for a live job is its CPUs over ranks x (1 + workers per rank), never a fixed 4
    (more threads than a 2-CPU machine has), and at least 1."""
    report = Report()
    report.processes = [
        {"pid": os.getpid(), "ppid": 1, "role": "rank", "cmdline": "python train.py", "threads": []}
        for _ in range(ranks)
    ] + [
        {"pid": 10**6 + i, "ppid": os.getpid(), "role": "dataloader-worker", "threads": []}
        for i in range(ranks * workers)
    ]
    expected = max(1, len(os.sched_getaffinity(0)) // (ranks * (1 + workers)))
    assert gather_facts(report).values["threads_per_process"] == str(expected)
    assert gather_facts(Report()).values["threads_per_process"] == "1"  # no live job: the safe value


# the main thread of the ninth hunt's h08_regex_backtrack as py-spy --native read it (a data filter's
# re.match on one document, backtracking): its regex fix came fourth, after three thread-pool settings
REGEX_FRAMES = [
    {"function": "sre_ucs1_count", "file": "libpython3.11.so.1.0", "native": True},
    {"function": "sre_ucs1_match", "file": "libpython3.11.so.1.0", "native": True},
    {"function": "_sre_SRE_Pattern_match", "file": "libpython3.11.so.1.0", "native": True},
    {"function": "<module>", "file": "filter.py", "line": 7},
]


@pytest.mark.parametrize("frames, first", [(REGEX_FRAMES, True), (REGEX_FRAMES[3:], False)])
def test_the_regex_fix_comes_first_for_a_thread_caught_in_the_regex_engine(knowledge, frames, first):
    from debug_stuck.advice.applies import order

    report = Report()
    report.processes = [
        {"pid": 7, "ppid": 1, "role": "rank", "cmdline": "python filter.py", "threads": [{"tid": 7, "frames": frames}]}
    ]
    facts = gather_facts(report)
    assert facts.context.get("busy_in") == ("regex" if first else None), facts.context
    fixes = knowledge.playbooks["cpu-spin"].fixes
    judged = [(fix, *judge(fix.applies, fix.flag, facts.context, facts.argv, facts.uses)) for fix in fixes]
    titles = [(fix.title, verdict) for fix, verdict, _ in order(judged)]
    regex_fix = "Bound a regex, or replace it"
    assert titles[0] == (regex_fix, APPLIES) if first else titles[-1] == (regex_fix, CONDITIONAL), titles
