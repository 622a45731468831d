import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two cores: two files at a time keeps socket-heavy tests from starving each other.
    maxWorkers: 2,
    reporters: ["default"],
  },
})
