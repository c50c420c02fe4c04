"""Not hung: the first step under torch.compile, whose compiler is still working (no cause; progressing).

``python compile_busy.py``. A small MLP is wrapped in ``torch.compile(model, backend=...)`` and
called once: Dynamo really traces it, then hands the graph to the backend, a compiler of the
script's own (``torch.compile`` takes any callable) that works for a very long time, as Inductor's
max-autotune or a large model's first compile does. It computes on the main thread (state R,
one core), under Dynamo's ``convert_frame`` / ``call_user_compiler`` frames; the log's last line
says the first step is compiling.

py-spy, MainThread active::

    slow_compiler (compile_busy.py)
    ...
    call_user_compiler (torch/_dynamo/output_graph.py)
    ...
    _compile (torch/_dynamo/convert_frame.py)
    ...
    main (compile_busy.py)

READY (``{"pid"}``): written by the compiler as it starts.
"""

from __future__ import annotations

import _common
import torch
from torch import nn


def slow_compiler(graph_module, example_inputs):
    _common.mark_ready()
    total = 0
    while True:  # the compiler's work: long, but work (the process computes on one core)
        for i in range(100_000):
            total = (total + i * i) % 1_000_003


def main() -> None:
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    step = torch.compile(model, backend=slow_compiler)
    print("epoch 0: compiling the first step", flush=True)
    step(torch.randn(8, 32)).sum().backward()
    print("step 0 done", flush=True)


if __name__ == "__main__":
    main()
