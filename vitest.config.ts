import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Bounds for a test that hangs, not speed targets: an e2e test of the budget runs a dozen CLI
    // processes around the sandbox's rate window, and on a loaded 2-core runner (a CI run beside
    // other jobs) one took 30 s where it takes 12 s alone.
    testTimeout: 90_000,
    hookTimeout: 60_000,
    // e2e files start real servers and spawn the CLI; two cores, so keep it modest.
    maxWorkers: 2,
    pool: "forks",
  },
});
