/**
 * A port that cannot open fails the start (src/runtime.ts `start`): the HTTP port taken rejects
 * with EADDRINUSE after the SMTP ports that did open are closed again and the runtime disposed
 * (src/main.ts then prints it as one `cannot start:` line and exits 1).
 */
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { quietLoggerLayer } from "../../src/logger.ts"
import { start } from "../../src/runtime.ts"
import { testSettings } from "../support/app.ts"
import { testDatabase } from "../support/db.ts"
import { binds, freePort } from "../support/free-port.ts"

describe("start with the HTTP port taken", () => {
  it("rejects with EADDRINUSE and leaves no SMTP port open; the next start works", { timeout: 60_000 }, async () => {
    const [http, smtp, sandbox, smtps] = [await freePort(), await freePort(), await freePort(), await freePort()]
    const squatter = net.createServer()
    await new Promise<void>((resolve) => squatter.listen(http, "127.0.0.1", resolve))
    const settings = testSettings({ smtpPort: smtp, sandboxSmtpPort: sandbox, sandboxSmtpsPort: smtps })
    const overrides = { database: testDatabase().layer, logger: quietLoggerLayer, workers: false }
    try {
      await expect(start(settings, overrides, { http })).rejects.toMatchObject({ code: "EADDRINUSE" })
      for (const port of [smtp, sandbox, smtps]) expect(await binds(port), `port ${port} released`).toBe(true)
    } finally {
      squatter.close()
    }
    const running = await start(settings, { ...overrides, database: testDatabase().layer }, { http: 0 })
    expect(running.ports).toMatchObject({ mx: smtp })
    await running.stop()
  })
})
