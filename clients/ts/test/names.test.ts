// The lowercase names must follow the generated enums exactly: a value added
// to the proto shows up here before it can be misnamed.

import assert from "node:assert/strict";
import { it } from "node:test";

import * as pb from "../src/gen/rebound/v1/rebound.js";
import { ACTIONS, BREAKER_STATES, CATEGORIES, OUTCOME_KINDS, REASONS, SESSION_STATES } from "../src/names.js";

/** The generated enum's names by wire number, without their prefix, lowercase. */
function generated(e: Record<string, string | number>, prefix: string): string[] {
  const names: string[] = [];
  for (const [name, value] of Object.entries(e)) {
    if (typeof value === "number" && value >= 0) names[value] = name.slice(prefix.length).toLowerCase();
  }
  return names;
}

it("names every enum value by its wire number", () => {
  assert.deepEqual([...ACTIONS], generated(pb.Action, "ACTION_"));
  assert.deepEqual([...CATEGORIES], generated(pb.Category, "CATEGORY_"));
  assert.deepEqual([...OUTCOME_KINDS], generated(pb.OutcomeKind, "OUTCOME_KIND_"));
  assert.deepEqual([...BREAKER_STATES], generated(pb.BreakerState, "BREAKER_STATE_"));
  assert.deepEqual([...SESSION_STATES], generated(pb.SessionState, "SESSION_STATE_"));
  assert.deepEqual([...REASONS], generated(pb.Reason, "REASON_"));
});
