// Drives one turn and one approval through tau's gRPC API from Node.js (@grpc/grpc-js, with the
// protos loaded at run time by @grpc/proto-loader), over the hub's Unix socket.
//
// Usage: node drive_turn.js <proto dir> <hub socket>
//
// Prints one JSON line describing what happened and exits 0 when the turn ran the approved tier-2
// tool and ended normally; any failure throws (exit 1). The dependencies are in package.json here.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

// The one tier encoding (tiers.proto): the enum's number is the tier people read, plus one.
const TIER_NUMBER = { TIER_READ: 0, TIER_DIGITAL_WRITE: 1, TIER_PHYSICAL: 2 };
const DEADLINE_MS = 30000;

function check(condition, what, value) {
  if (!condition) {
    throw new Error(`${what}: ${JSON.stringify(value)}`);
  }
}

function deadline(ms) {
  return new Date(Date.now() + ms);
}

function loadTau(protoDir) {
  const dir = path.join(protoDir, "tau", "v1");
  const files = fs.readdirSync(dir).filter((f) => f.endsWith(".proto")).map((f) => path.join(dir, f));
  const definition = protoLoader.loadSync(files, {
    includeDirs: [protoDir],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).tau.v1;
}

function unary(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: deadline(10000) }, (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

async function main(protoDir, socket) {
  const tau = loadTau(protoDir);
  // The socket path would be sent as :authority, which the hub's HTTP/2 stack refuses.
  const client = new tau.Tau(`unix://${socket}`, grpc.credentials.createInsecure(), {
    "grpc.default_authority": "localhost",
  });
  const opened = await unary(client, "OpenSession", { new_session: true, channel: "node" });
  const sessionId = opened.session.session_id;
  const stream = client.StartTurn(
    { session_id: sessionId, text: "turn on the lamp", channel: "node", idempotency_key: "node-1" },
    { deadline: deadline(DEADLINE_MS) },
  );
  let attachment = null;
  let decision = null;
  let call = null;
  let ended = null;
  const seqs = [];
  for await (const message of stream) {
    if (message.kind === "accepted") {
      attachment = message.accepted.attachment_id;
      continue;
    }
    const event = message.event;
    seqs.push(event.seq);
    if (event.kind === "approval_requested") {
      const approval = event.approval_requested.approval;
      check(approval.tool === "demo_physical_action", "the approval's tool", approval);
      check(TIER_NUMBER[approval.tier] === 2, "the approval's tier", approval);
      decision = await unary(client, "DecideApproval", {
        approval_id: approval.approval_id,
        decision: "APPROVAL_DECISION_APPROVED",
        attachment_id: attachment,
      });
      check(decision.outcome === "DECIDE_OUTCOME_APPLIED", "the decision", decision);
    } else if (event.kind === "tool_call") {
      call = event.tool_call;
    } else if (event.kind === "turn_ended") {
      ended = event.turn_ended;
    }
  }
  check(decision !== null, "no approval was asked", seqs);
  check(call !== null && call.tool === "demo_physical_action", "the tool call", call);
  check(call.status === "TOOL_CALL_STATUS_SUCCESS", "the call's status", call);
  check(call.approval === "approved", "the call's approval", call);
  check(TIER_NUMBER[call.tier] === 2, "the call's tier", call);
  check(ended !== null && ended.stop_reason === "end_turn", "the turn's end", ended);
  check(seqs.every((seq, i) => seq === seqs[0] + i), "the event seqs", seqs);
  const pending = await unary(client, "ListPendingApprovals", {});
  check(pending.approvals.length === 0, "pending approvals after the turn", pending);
  client.close();
  console.log(JSON.stringify({ ok: true, session_id: sessionId, reply: ended.text, events: seqs.length }));
}

main(process.argv[2], process.argv[3]).catch((error) => {
  console.error(error);
  process.exit(1);
});
