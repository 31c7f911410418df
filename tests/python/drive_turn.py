"""Drives one turn and one approval through tau's gRPC API from Python (grpcio), over the hub's
Unix socket, with stubs generated from proto/ by grpcio-tools.

Usage: drive_turn.py <proto dir> <hub socket>

Prints one JSON line describing what happened and exits 0 when the turn ran the approved tier-2
tool and ended normally; any failure raises (exit 1).
"""

import importlib
import json
import pathlib
import sys
import tempfile

import grpc
from grpc_tools import protoc


def generate(proto_dir: pathlib.Path, out: str) -> None:
    files = sorted(str(p.relative_to(proto_dir)) for p in (proto_dir / "tau" / "v1").glob("*.proto"))
    include = pathlib.Path(protoc.__file__).parent / "_proto"
    code = protoc.main(
        ["grpc_tools.protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out}",
         f"--grpc_python_out={out}", *files]
    )
    if code != 0:
        raise SystemExit(f"protoc failed with {code}")
    sys.path.insert(0, out)


def main(proto_dir: str, socket: str) -> None:
    out = tempfile.mkdtemp(prefix="tau-py-")
    generate(pathlib.Path(proto_dir), out)
    tau_grpc = importlib.import_module("tau.v1.tau_pb2_grpc")
    sessions = importlib.import_module("tau.v1.sessions_pb2")
    turns = importlib.import_module("tau.v1.turns_pb2")
    approvals = importlib.import_module("tau.v1.approvals_pb2")
    events = importlib.import_module("tau.v1.events_pb2")
    tiers = importlib.import_module("tau.v1.tiers_pb2")
    # The one tier encoding (tiers.proto): the enum's number is the tier people read, plus one.
    tier_number = {tiers.TIER_READ: 0, tiers.TIER_DIGITAL_WRITE: 1, tiers.TIER_PHYSICAL: 2}

    # grpcio sends the socket path as :authority, which the hub's HTTP/2 stack refuses.
    channel = grpc.insecure_channel(
        f"unix://{socket}", options=[("grpc.default_authority", "localhost")]
    )
    stub = tau_grpc.TauStub(channel)
    opened = stub.OpenSession(
        sessions.OpenSessionRequest(new_session=True, channel="python"), timeout=10
    )
    session_id = opened.session.session_id
    stream = stub.StartTurn(
        turns.StartTurnRequest(
            session_id=session_id,
            text="turn on the lamp",
            channel="python",
            idempotency_key="python-1",
        ),
        timeout=30,
    )
    attachment = None
    decision = None
    call = None
    ended = None
    seqs = []
    for message in stream:
        if message.WhichOneof("kind") == "accepted":
            attachment = message.accepted.attachment_id
            continue
        event = message.event
        seqs.append(event.seq)
        kind = event.WhichOneof("kind")
        if kind == "approval_requested":
            approval = event.approval_requested.approval
            assert approval.tool == "demo_physical_action", approval
            assert tier_number[approval.tier] == 2, approval
            decision = stub.DecideApproval(
                approvals.DecideApprovalRequest(
                    approval_id=approval.approval_id,
                    decision=approvals.APPROVAL_DECISION_APPROVED,
                    attachment_id=attachment,
                ),
                timeout=10,
            )
            assert decision.outcome == approvals.DECIDE_OUTCOME_APPLIED, decision
        elif kind == "tool_call":
            call = event.tool_call
        elif kind == "turn_ended":
            ended = event.turn_ended
    assert decision is not None, "no approval was asked"
    assert call is not None and call.tool == "demo_physical_action", call
    assert call.status == events.TOOL_CALL_STATUS_SUCCESS, call
    assert call.approval == "approved", call
    assert tier_number[call.tier] == 2, call
    assert ended is not None and ended.stop_reason == "end_turn", ended
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    pending = stub.ListPendingApprovals(approvals.ListPendingApprovalsRequest(), timeout=10)
    assert len(pending.approvals) == 0, pending
    print(json.dumps({"ok": True, "session_id": session_id, "reply": ended.text, "events": len(seqs)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
