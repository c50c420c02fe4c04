"""What a wait on an established connection says, from the kernel's tcp_info when it was read
(live.chain._describe): the fifteenth hunt's h03 got "the peer sent part of its answer and stopped"
for a steady download on a run where `ss` gave no reading (the machine was loaded)."""

from __future__ import annotations

from debug_stuck.live.chain import _describe
from debug_stuck.live.hop import Hop

# the wait as probes.collectors.waits resolved it in that run (its out.json), ss's fields absent
WAIT = {
    "tid": 26543,
    "op": "poll",
    "syscall": "poll",
    "fd": 11,
    "object": {
        "kind": "socket",
        "inode": 1586247,
        "proto": "tcp",
        "local": "127.0.0.1:39594",
        "remote": "127.0.0.1:18443",
        "state": "ESTABLISHED",
        "peer_inode": 1586248,
        "peer": [],
    },
    "timeout_ms": 60000,
}


def _hop() -> Hop:
    return Hop(pid=26543, role="dataloader-worker", rank=None, tid=26543, thread="MainThread", where=None)


def test_a_connection_whose_tcp_info_was_not_read_claims_no_stall():
    hop = _hop()
    _describe(hop, WAIT, {26543})
    assert "could not be read" in hop.detail and "stopped" not in hop.detail, hop.detail
    assert "end" not in hop.facts and "body" not in hop.facts, hop.facts


def test_a_connection_silent_for_seconds_is_one_that_never_answers():
    hop = _hop()
    silent = dict(WAIT, object=dict(WAIT["object"], last_received_ms=9000, received_bytes=0, sent_bytes=120))
    _describe(hop, silent, {26543})
    assert hop.facts.get("end") == "no-answer" and "never answers" in hop.detail, (hop.detail, hop.facts)


def test_a_hung_reading_that_ends_on_an_unread_connection_is_undecided():
    """A frozen stack over a connection nobody could measure is what a slow download looks like too."""
    from debug_stuck.live.assess import _transfer_unread
    from debug_stuck.live.chain import Chain
    from debug_stuck.live.progress import Progress

    hop = _hop()
    _describe(hop, WAIT, {26543})
    judged = _transfer_unread([Chain([hop])], Progress(True, ["no stack moved"]))
    assert judged.hung is None and "could not be read" in judged.reasons[0], judged
    measured = _hop()
    _describe(measured, dict(WAIT, object=dict(WAIT["object"], last_received_ms=9000, received_bytes=0)), {26543})
    assert _transfer_unread([Chain([measured])], Progress(True, ["no stack moved"])).hung is True
