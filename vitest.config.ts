import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // e2e files start real servers and spawn the CLI; two cores, so keep it modest.
    maxWorkers: 2,
    pool: "forks",
  },
});
