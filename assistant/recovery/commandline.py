"""A training command line taken apart: the launcher, the script or module, and its options."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable, List, Optional

LAUNCHERS = ("torchrun", "accelerate", "deepspeed", "python")

PYTHON = re.compile(r"^python[\d.]*$")
CONSOLE_LAUNCHERS = {"torchrun": "torchrun", "accelerate": "accelerate", "deepspeed": "deepspeed"}
MODULE_LAUNCHERS = {
    "torch.distributed.run": "torchrun",
    "torch.distributed.launch": "torchrun",
    "accelerate.commands.launch": "accelerate",
    "accelerate.commands.accelerate_cli": "accelerate",
    "deepspeed.launcher.runner": "deepspeed",
    "deepspeed.launcher.launch": "deepspeed",
}
LAUNCHER_FLAGS = {
    "torchrun": {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "--use-env", "--use_env"},
    "accelerate": {
        "--cpu",
        "--multi_gpu",
        "--tpu",
        "--use_deepspeed",
        "--use_fsdp",
        "--use_megatron_lm",
        "--use_xpu",
        "--no_python",
        "--debug",
        "-q",
        "--quiet",
        "--same_network",
        "--enable_cpu_affinity",
        "--downcast_bf16",
        "--dynamo_use_fullgraph",
        "--dynamo_use_dynamic",
    },
    "deepspeed": {"--no_local_rank", "--no_python", "--force_multi", "--bind_cores_to_rank", "--no_ssh_check"},
}
PYTHON_VALUE_OPTS = {"-X", "-W", "-Q"}


@dataclass
class Launch:
    """A training command line taken apart."""

    argv: List[str]
    launcher: str = "python"
    launcher_index: int = 0  # where the launcher (or python) sits in argv
    program_index: Optional[int] = None  # index of the script or module name
    script: Optional[str] = None
    module: Optional[str] = None
    console: Optional[str] = None  # "yolo" for the Ultralytics CLI
    nproc: Optional[int] = None
    nnodes: Optional[str] = None  # as given: "2", or an elastic range "1:4"

    @property
    def program_args(self) -> List[str]:
        if self.console:
            return self.argv[self.launcher_index + 1 :]
        if self.program_index is None:
            return []
        return self.argv[self.program_index + 1 :]

    @property
    def script_name(self) -> Optional[str]:
        if self.script:
            return os.path.basename(self.script)
        if self.module:
            return self.module.rsplit(".", 1)[-1] + ".py"
        return None


def parse_launch(cmdline: List[str]) -> Launch:
    """Find the launcher, the script (or module) and its arguments in a command line."""
    argv = [str(a) for a in cmdline]
    launch = Launch(argv=argv)
    for i, token in enumerate(argv):
        base = os.path.basename(token)
        if base in ("yolo", "ultralytics"):
            launch.console, launch.launcher_index = "yolo", i
            return launch
        if base in CONSOLE_LAUNCHERS:
            launch.launcher, launch.launcher_index = CONSOLE_LAUNCHERS[base], i
            _parse_launcher_args(launch, i + 1)
            return launch
        if PYTHON.match(base):
            launch.launcher_index = i
            _parse_python_args(launch, i + 1)
            return launch
    # no interpreter named (an executable script): the first token is the program
    if argv:
        launch.script, launch.program_index = argv[0], 0
    return launch


def _parse_python_args(launch: Launch, start: int) -> None:
    argv = launch.argv
    i = start
    while i < len(argv):
        token = argv[i]
        if token == "-m" and i + 1 < len(argv):
            module = argv[i + 1]
            if module in MODULE_LAUNCHERS:
                launch.launcher = MODULE_LAUNCHERS[module]
                nxt = i + 2
                if launch.launcher == "accelerate" and nxt < len(argv) and argv[nxt] == "launch":
                    nxt += 1
                _parse_launcher_args(launch, nxt)
                return
            if module == "accelerate" and i + 2 < len(argv) and argv[i + 2] == "launch":
                launch.launcher = "accelerate"
                _parse_launcher_args(launch, i + 3)
                return
            launch.module, launch.program_index = module, i + 1
            return
        if token == "-c":
            return
        if token in PYTHON_VALUE_OPTS:
            i += 2
            continue
        if token.startswith("-"):
            i += 1
            continue
        base = os.path.basename(token)
        if base in ("yolo", "ultralytics"):
            launch.console, launch.launcher_index = "yolo", i
            return
        if base in CONSOLE_LAUNCHERS:  # python /usr/bin/torchrun ... (how /proc shows console scripts)
            launch.launcher = CONSOLE_LAUNCHERS[base]
            _parse_launcher_args(launch, i + 1)
            return
        launch.script, launch.program_index = token, i
        return


def _parse_launcher_args(launch: Launch, start: int) -> None:
    argv = launch.argv
    i = start
    if launch.launcher == "accelerate" and i < len(argv) and argv[i] == "launch":
        i += 1
    flags = LAUNCHER_FLAGS.get(launch.launcher, set())
    module_mode = False
    while i < len(argv):
        token = argv[i]
        if token in ("-m", "--module"):
            module_mode = True
            i += 1
            continue
        if token.startswith("-"):
            name, has_value, value = token.partition("=")
            if name in ("--nproc_per_node", "--nproc-per-node", "--num_processes", "--num_gpus"):
                raw = value if has_value else (argv[i + 1] if i + 1 < len(argv) else "")
                launch.nproc = int(raw) if raw.isdigit() else launch.nproc
            if name in ("--nnodes", "--num_machines"):
                raw = value if has_value else (argv[i + 1] if i + 1 < len(argv) else "")
                launch.nnodes = raw if re.fullmatch(r"\d+(:\d+)?", raw) else launch.nnodes
            if has_value or token in flags:
                i += 1
            elif i + 1 < len(argv) and argv[i + 1].endswith(".py"):
                i += 1  # an unknown flag followed by the script: the flag takes no value
            else:
                i += 2
            continue
        if module_mode or (not token.endswith(".py") and re.match(r"^[A-Za-z_][\w.]*$", token) and "." in token):
            launch.module = token
        else:
            launch.script = token
        launch.program_index = i
        return


def option_value(args: List[str], *names: str) -> Optional[str]:
    """The value of --name (``--name v``, ``--name=v``, or ``name=v`` for yolo-style), last one wins."""
    found = None
    variants = set()
    for name in names:
        bare = name.lstrip("-")
        variants |= {bare, bare.replace("_", "-"), bare.replace("-", "_")}
    for i, token in enumerate(args):
        key, eq, value = token.partition("=")
        bare = key.lstrip("-")
        if bare not in variants:
            continue
        if eq:
            found = value
        elif key.startswith("-") and i + 1 < len(args) and not args[i + 1].startswith("-"):
            found = args[i + 1]
    return found


def has_option(args: List[str], *names: str) -> bool:
    variants = set()
    for name in names:
        bare = name.lstrip("-")
        variants |= {bare, bare.replace("_", "-"), bare.replace("-", "_")}
    return any(t.startswith("-") and t.lstrip("-").partition("=")[0] in variants for t in args)


def set_option(argv: List[str], flag: str, value: Optional[str], aliases: Iterable[str] = ()) -> List[str]:
    """argv without any earlier occurrence of flag (or an alias), with ``flag [value]`` appended."""
    variants = set()
    for name in (flag, *aliases):
        bare = name.lstrip("-")
        variants |= {bare, bare.replace("_", "-"), bare.replace("-", "_")}
    out: List[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        key, eq, _ = token.partition("=")
        if token.startswith("-") and key.lstrip("-") in variants:
            if not eq and value is not None and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                i += 1  # its old value goes too
            i += 1
            continue
        out.append(token)
        i += 1
    out.append(flag)
    if value is not None:
        out.append(value)
    return out
