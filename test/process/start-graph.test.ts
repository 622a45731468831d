/**
 * What the service loads before it takes any work. mailparser, mailauth, nodemailer's transports,
 * jose and the OpenAI client are loaded with the first message parsed, sent or composed, the first
 * Google sign-in or AI reply (effects/shared/load-once.ts): ~10 MiB of an idle process's resident
 * memory, which on PGlite must stay within 250 MB (issue 11, bench/REPORT.md). This fails when an
 * import brings one of them back into the modules that src/main.ts loads to start.
 */
import { describe, expect, it } from "vitest"
import { moduleGraph } from "../support/module-graph.ts"

/** Every module resolved importing what src/main.ts imports to serve. */
const startGraph = () => moduleGraph(["src/process.ts", "src/config.ts", "src/logger.ts", "src/runtime.ts"])

describe("the modules loaded to start the service", () => {
  it("hold neither mail parsing, authentication and composition, nor jose or the OpenAI client", async () => {
    const urls = await startGraph()
    expect(urls.some((u) => u.includes("/src/runtime.ts"))).toBe(true)
    const heavy = urls.filter((u) =>
      /\/node_modules\/(mailparser|mailauth|jose|openai)\//.test(u) ||
      // nodemailer's address parser (and the helpers it needs) is small; its transports are not.
      /\/node_modules\/nodemailer\/.*\/(nodemailer|mailer|smtp-transport|smtp-pool|stream-transport|mail-composer|dkim)\b/.test(u)
    )
    expect(heavy).toEqual([])
  }, 30_000)
})
