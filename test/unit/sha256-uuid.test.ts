import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { homeDir } from "../../src/core/home.js";
import { sha256Hex } from "../../src/core/sha256.js";
import { randomUuid } from "../../src/input/uuid.js";
import { keyHash } from "../../src/limits/budget.js";

const nodeSha256 = (s: string) => createHash("sha256").update(s).digest("hex");

describe("sha256Hex", () => {
  it("is node:crypto's digest, at every length around the block and padding boundaries", () => {
    for (let n = 0; n <= 200; n++) {
      const s = "k".repeat(n);
      expect(sha256Hex(s), `length ${n}`).toBe(nodeSha256(s));
    }
  });

  it("hashes the UTF-8 bytes (non-ASCII, NUL, astral characters)", () => {
    for (const s of ["", "abc", "mailsend-ratelimit\0key", "ключ-ü-€", "🔑".repeat(40), "\u0000\u007f\u0080\uffff"]) {
      expect(sha256Hex(s)).toBe(nodeSha256(s));
    }
  });

  it("matches on random strings", () => {
    for (let i = 0; i < 300; i++) {
      const len = Math.floor(Math.random() * 300);
      const s = Array.from({ length: len }, () => String.fromCharCode(Math.floor(Math.random() * 0xd7ff))).join("");
      expect(sha256Hex(s)).toBe(nodeSha256(s));
    }
  });

  it("keeps the budget's state names: keyHash is the first 32 hex digits of node:crypto's sha256", () => {
    const key = "msk_test_Zx9Qw7Er5Ty3Ui1Op";
    expect(keyHash(key)).toBe(nodeSha256(`mailsend-ratelimit\0${key}`).slice(0, 32));
  });
});

describe("randomUuid", () => {
  it("is a version 4, variant 1 UUID in crypto.randomUUID's form", () => {
    for (let i = 0; i < 200; i++) expect(randomUuid()).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it("does not repeat", () => {
    const seen = new Set(Array.from({ length: 2000 }, () => randomUuid()));
    expect(seen.size).toBe(2000);
  });
});

describe("homeDir", () => {
  it("is HOME when set, else the account's home", async () => {
    expect(homeDir({ HOME: "/h/x" })).toBe("/h/x");
    const { homedir } = await import("node:os");
    expect(homeDir({})).toBe(homedir());
  });
});
