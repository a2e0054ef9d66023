// The session's client-side memory without a sidecar: the error context it
// gives while the sidecar is away, in the sidecar's block shape.

import assert from "node:assert/strict";
import { it } from "node:test";

import { decide, DEFAULT_FALLBACK_POLICY } from "../src/fallback.js";
import * as pb from "../src/gen/rebound/v1/rebound.js";
import { LocalState } from "../src/local.js";

/** Observes the outcome and records the fallback's verdict on it, as a session does. */
function fail(state: LocalState, outcome: pb.DeepPartial<pb.Outcome>): void {
  const o = pb.Outcome.fromPartial(outcome);
  state.record(o, decide(DEFAULT_FALLBACK_POLICY, o, { ...state.observe(o), limits: state.limits, nowMs: 0, random: 0.5 }));
}

it("shows a repeated error once, with its count, category and suggestion", () => {
  const state = new LocalState(0);
  // Node's fetch (undici) on a refused connection: TypeError "fetch failed", cause ECONNREFUSED.
  for (let i = 0; i < 2; i++) fail(state, { tool: "fetch", code: "ECONNREFUSED", message: "fetch failed" });
  const cx = state.context();
  assert.equal(
    cx.text,
    '<error tool="fetch" type="network">\nECONNREFUSED: fetch failed (×2)\nsuggestion: Check the host, or use another tool.\n</error>',
  );
  assert.deepEqual([cx.errorsShown, cx.errorsHidden], [1, 0]);
});

it("leaves out the category until a verdict gives one, and an unknown one", () => {
  const state = new LocalState(0);
  state.observe(pb.Outcome.fromPartial({ tool: "search", httpStatus: 404, message: "Not Found" }));
  assert.equal(state.context().text, '<error tool="search">\nHTTP 404: Not Found\n</error>');
  fail(state, { tool: "widget", message: "the frobnicator declined" });
  assert.equal(
    state.context().text,
    '<error tool="search">\nHTTP 404: Not Found\n</error>\n<error tool="widget">\nthe frobnicator declined\n</error>',
  );
});

it("counts a new message afresh and shows only the latest few errors", () => {
  const state = new LocalState(0);
  for (const tool of ["b", "c"]) fail(state, { tool, httpStatus: 401 });
  fail(state, { tool: "a", httpStatus: 503, message: "first" });
  fail(state, { tool: "a", httpStatus: 503, message: "second" });
  fail(state, { tool: "d", httpStatus: 401 });
  const cx = state.context();
  assert.deepEqual([cx.errorsShown, cx.errorsHidden], [3, 1]);
  assert.ok(cx.text.startsWith('1 earlier unresolved error(s) not shown.\n<error tool="c" type="auth">\n'), cx.text);
  assert.ok(cx.text.includes('<error tool="a" type="unavailable">\nHTTP 503: second\nsuggestion:'), cx.text);
  assert.ok(cx.text.endsWith('<error tool="d" type="auth">\nHTTP 401\nsuggestion: Ask a human for credentials.\n</error>'), cx.text);
});

it("counts a repeated call id once and keeps its first verdict, for the latest 16 calls", () => {
  const state = new LocalState(0);
  const first = pb.Outcome.fromPartial({ tool: "search", callId: "call-1", httpStatus: 503, message: "Service Unavailable" });
  const firstVerdict = decide(DEFAULT_FALLBACK_POLICY, first, { ...state.observe(first), nowMs: 0, random: 0.5 });
  state.record(first, firstVerdict);
  // The same call reported twice more, as after a lost answer: the sidecar counts it once.
  for (let i = 0; i < 2; i++) {
    const again = pb.Outcome.fromPartial({ ...first });
    assert.equal(state.observe(again).consecutive, 1, "the failures in a row counted the repeat");
    assert.equal(state.recall("call-1"), firstVerdict);
    state.record(again, decide(DEFAULT_FALLBACK_POLICY, again, { consecutive: 3, nowMs: 0, random: 0.5 }));
  }
  const sum = state.snapshot(0);
  assert.deepEqual([sum.calls, sum.errors, sum.retries, sum.escalations, sum.state], [1, 1, 1, 0, pb.SessionState.SESSION_STATE_ACTIVE]);
  assert.equal(state.context().text.includes("(×"), false, state.context().text);
  // Forgotten after 16 later calls, as the sidecar's default idempotency window.
  for (let i = 0; i < 16; i++) fail(state, { tool: "fetch", callId: `other-${i}`, httpStatus: 404 });
  assert.equal(state.recall("call-1"), undefined);
  assert.notEqual(state.recall("other-0"), undefined);
});
