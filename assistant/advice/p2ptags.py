"""The tags of a point-to-point deadlock's send and recv, as the job's source writes them (read,
never run): `dist.isend(t, dst=1, tag=step)` on one rank and `dist.irecv(buf, src=0, tag=0)` on the
other wait for ever, as a recv takes only a send from its src with the same tag (torch docs,
torch.distributed.send/recv: "tag (int, optional): Tag to match send with remote recv")."""

from __future__ import annotations

import ast
import os
from typing import Optional, Tuple

from debug_stuck.live.culprit import P2P_RECV, P2P_SEND
from debug_stuck.live.selflock import named_calls, parse_source, source_of

DEFAULT_TAG = "0"  # torch 2.13.0 distributed_c10d.py: send/recv/isend/irecv(..., tag: int = 0)


def _tag(call: ast.Call) -> str:
    for keyword in call.keywords:
        if keyword.arg == "tag":
            return ast.unparse(keyword.value)
    return DEFAULT_TAG if len(call.args) < 4 else ast.unparse(call.args[3])  # send(tensor, dst, group, tag)


def side_call(side: dict, reader, names) -> Optional[Tuple[ast.Call, str]]:
    """The call of `names` that the side's own frame waits in, and that frame's file name: the one on
    its line (a blocking send or recv), else the nearest above it in its scope (an isend whose request
    it waits on, `req.wait()`)."""
    from debug_stuck.live.loops import enclosing_function

    for pid in side.get("pids") or []:
        for thread in (reader.processes.get(pid) or {}).get("threads") or []:
            frame = next((f for f in thread.get("frames") or [] if not f.get("native") and reader.is_own(f)), None)
            if frame is None or not isinstance(frame.get("line"), int):
                continue
            path = frame.get("path") or frame.get("file")
            tree = parse_source(source_of(path, pid))
            if tree is None:
                continue
            scope = enclosing_function(tree, frame["line"]) or tree
            above = [call for call in named_calls(scope, names) if call.lineno <= frame["line"]]
            if not above:
                return None
            return max(above, key=lambda call: call.lineno), os.path.basename(path)
    return None


def tag_mismatch(finding: dict, reader) -> str:
    """A sentence naming both tags when a p2p deadlock's one send side and one recv side pass tags
    that differ as written; empty otherwise."""
    sides = finding.get("sides") or []
    sends = [s for s in sides if s.get("collective") in P2P_SEND]
    recvs = [s for s in sides if s.get("collective") in P2P_RECV]
    if finding.get("ops") != "p2p" or len(sends) != 1 or len(recvs) != 1:
        return ""
    send = side_call(sends[0], reader, (sends[0]["collective"],))
    recv = side_call(recvs[0], reader, (recvs[0]["collective"],))
    if send is None or recv is None or _tag(send[0]) == _tag(recv[0]):
        return ""
    return (
        f"{sends[0].get('who')} sends with tag={_tag(send[0])} ({send[1]}:{send[0].lineno}) and "
        f"{recvs[0].get('who')} receives with tag={_tag(recv[0])} ({recv[1]}:{recv[0].lineno})"
    )
