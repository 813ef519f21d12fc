/** The polling helper the tests wait with: a timeout names what was waited for. */
import { expect, test } from "vitest";
import { until } from "../helpers/until.js";

test("until: true at once, true later, and a timeout that says what it waited for", async () => {
  await until(() => true);
  let n = 0;
  await until(() => ++n >= 3, { everyMs: 1 });
  expect(n).toBe(3);
  await expect(until(() => false, { what: "the runner to exit", timeoutMs: 30 })).rejects.toThrow(
    "timed out after 30 ms waiting for the runner to exit",
  );
  const queue: string[] = ["x"];
  await expect(until(() => queue.length === 0, 20)).rejects.toThrow(
    "timed out after 20 ms waiting for queue.length === 0",
  );
});
