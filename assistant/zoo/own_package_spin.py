"""Hang: a spin in the project's own ``datasets/`` package, whose name is also a library's (HF datasets).

``python own_package_spin.py`` writes a small project into the workdir and runs its ``train.py`` in
this process (exec, same pid)::

    proj/train.py              from datasets.shards import wait_for_shard
    proj/datasets/shards.py    while not os.path.exists(path): n += 1    # a flag nobody writes

py-spy names the frame ``datasets/shards.py`` (relative to the sys.path entry it came from), the same
short name as HF's ``datasets`` package. Under the folder of the job's entry script it is the job's
own code: its loop is the culprit, not "a library spinning".

READY (``{"pid", "flag", "line"}``): once the main thread has turned inside ``wait_for_shard``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import _common

SHARDS = """import os


def wait_for_shard(path):
    n = 0
    while not os.path.exists(path):  # spins: nobody writes the flag
        n += 1
    return n
"""

TRAIN = """import sys
import threading

sys.path.append({zoo!r})
import _common  # noqa: E402

from datasets.shards import wait_for_shard  # noqa: E402

main_thread = threading.main_thread()
_common.ready_when(
    lambda: "wait_for_shard" in _common.stack_functions(main_thread.ident),
    info=lambda: {{"flag": {flag!r}, "line": 6}},
)
print("epoch 0 step 10 loss 1.2", flush=True)
wait_for_shard({flag!r})
"""


def main() -> None:
    project = _common.workdir() / "proj"
    (project / "datasets").mkdir(parents=True, exist_ok=True)
    (project / "datasets" / "__init__.py").write_text("")
    (project / "datasets" / "shards.py").write_text(SHARDS)
    flag = str(_common.workdir() / "shard-ready.flag")
    train = project / "train.py"
    train.write_text(TRAIN.format(zoo=str(Path(__file__).resolve().parent), flag=flag))
    os.execv(sys.executable, [sys.executable, str(train)])


if __name__ == "__main__":
    main()
