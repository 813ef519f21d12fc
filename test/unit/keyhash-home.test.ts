import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { homeDir } from "../../src/core/home.js";
import { keyHash } from "../../src/limits/budget.js";

const nodeSha256 = (s: string) => createHash("sha256").update(s).digest("hex");

describe("keyHash", () => {
  it("keeps the budget's state names: keyHash is the first 32 hex digits of node:crypto's sha256", () => {
    const key = "msk_test_Zx9Qw7Er5Ty3Ui1Op";
    expect(keyHash(key)).toBe(nodeSha256(`mailsend-ratelimit\0${key}`).slice(0, 32));
  });
});

describe("homeDir", () => {
  it("is HOME when set, else the account's home", async () => {
    expect(homeDir({ HOME: "/h/x" })).toBe("/h/x");
    const { homedir } = await import("node:os");
    expect(homeDir({})).toBe(homedir());
  });
});
