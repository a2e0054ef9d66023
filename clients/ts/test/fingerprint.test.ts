// The port of the sidecar's normaliser (src/fingerprint.ts), checked against
// every message of tests/data/fingerprints/normalised.jsonl and the sidecar's
// normalised text for it: the fallback judges identical errors on that text.

import assert from "node:assert/strict";
import { it } from "node:test";

import { normalise, PREFIX_BYTES } from "../src/fingerprint.js";
import { lines } from "./helpers.js";

const CASES = lines<{ message: string; normalised: string }>("fingerprints/normalised.jsonl");

it("gives the sidecar's normalised text for every message of the shared file", () => {
  // A file read short would leave most of the edge cases unchecked.
  assert.ok(CASES.length >= 714, `tests/data/fingerprints/normalised.jsonl: ${CASES.length} lines`);
  const wrong = CASES.filter((c) => normalise(c.message) !== c.normalised);
  assert.deepEqual(
    wrong.slice(0, 5).map((c) => [c.message.slice(0, 120), normalise(c.message), c.normalised]),
    [],
    `${wrong.length} of ${CASES.length} messages normalised otherwise than by the sidecar`,
  );
});

it("cuts the 512-byte prefix on a UTF-8 character boundary, not a UTF-16 one", () => {
  // 510 ASCII bytes, then "é" (2 bytes: ends at 512, kept) or "€" (3 bytes: would end at 513, cut).
  const pad = "a".repeat(PREFIX_BYTES - 2);
  assert.equal(normalise(`${pad}é tail`), `${pad}é`);
  assert.equal(normalise(`${pad}€ tail`), pad);
  // A surrogate pair (4 bytes) across the 512th byte, and across the 512th UTF-16 code unit.
  assert.equal(normalise(`${"a".repeat(PREFIX_BYTES - 1)}😀`), "a".repeat(PREFIX_BYTES - 1));
  assert.equal(normalise(`${"a".repeat(PREFIX_BYTES - 4)}😀 x`), `${"a".repeat(PREFIX_BYTES - 4)}😀`);
  // Three bytes a character: the cut is at byte 512, far before the 512th character.
  assert.equal(normalise("日".repeat(300)), "日".repeat(170));
});

it("lower-cases ASCII letters only, and folds what varies", () => {
  assert.equal(normalise("ÉCHEC Straße FAILED"), "Échec straße failed");
  assert.equal(normalise("timed out after 30.1s"), normalise("timed out after 30.4s"));
  assert.equal(normalise("GET https://x.io/a?b=1 failed after 3.2s: open /tmp/f: 'x' denied"), "get <url> failed after <n> open <path> <q> denied");
  assert.notEqual(normalise("don't retry"), normalise("do retry"));
});
