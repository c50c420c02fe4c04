"""The nodes a torchrun agent waits for, read from its own command line (torch 2.13.0
torch/distributed/run.py: --nnodes N or MIN:MAX, each option spelled with '-' or '_')."""

from __future__ import annotations

import pytest

from debug_stuck.advice.worldcount import _agent


@pytest.mark.parametrize(
    "argv, nodes, rdzv, one_node",
    [
        (
            ["/v/bin/python3", "/v/bin/torchrun", "--nnodes=2", "--rdzv_endpoint=n0:29400", "--rdzv_id=exp42", "t.py"],
            "2", " exp42 at n0:29400",
            "/v/bin/torchrun --nnodes=1 --rdzv_endpoint=n0:29400 --rdzv_id=exp42 t.py",
        ),
        (  # the interpreter kept for -m; the script's own --nnodes is not the launcher's
            ["/usr/bin/python3", "-u", "-m", "torch.distributed.run", "--nnodes", "4", "--rdzv-endpoint", "h:1",
             "x.py", "--nnodes", "9"],
            "4", " at h:1",
            "/usr/bin/python3 -u -m torch.distributed.run --nnodes=1 --rdzv-endpoint h:1 x.py --nnodes 9",
        ),
        (  # static rendezvous: the master's address stands for the endpoint
            ["torchrun", "--nnodes=2", "--master_addr=10.0.0.1", "--master_port=1234", "t.py"],
            "2", " at 10.0.0.1:1234", "torchrun --nnodes=1 --master_addr=10.0.0.1 --master_port=1234 t.py",
        ),
    ],
)  # fmt: skip
def test_an_agent_waits_for_the_least_of_its_nnodes(argv, nodes, rdzv, one_node):
    values: dict = {}
    _agent(values, argv)
    assert (values["agent_nodes"], values["agent_rdzv"], values["agent_one_node"]) == (nodes, rdzv, one_node)


@pytest.mark.parametrize(
    "argv",
    [
        ["torchrun", "--nnodes=1:4", "t.py"],  # may start alone: no node is missing for sure
        ["torchrun", "--nproc_per_node=2", "t.py"],  # one node
        ["python", "train.py", "--nnodes=2"],  # no launcher: the script's own flag
    ],
)
def test_no_count_where_no_node_is_awaited(argv):
    values: dict = {}
    _agent(values, argv)
    assert values == {}
