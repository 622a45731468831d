/**
 * Composition root: settings → runtime (services, workers, database) → HTTP and SMTP listeners.
 * SIGTERM/SIGINT stop accepting, finish in-flight work, stop workers and close the database.
 *
 * Before any of that loads, src/process.ts may re-execute the process with a leaner heap, or
 * (WEB_CONCURRENCY > 1 on PostgreSQL) make this process the primary of several workers.
 */
import { announceReady, becomeLean, runPrimary } from "./process.ts"

const serve = async () => {
  const { Effect } = await import("effect")
  const { loadSettings } = await import("./config.ts")
  const { stdoutSink } = await import("./logger.ts")
  const { start } = await import("./runtime.ts")

  const settings = await Effect.runPromise(Effect.result(loadSettings()))
  if (settings._tag === "Failure") {
    console.error(settings.failure.message)
    process.exit(1)
  }

  const running = await start(settings.success).catch((e: unknown) => {
    // Start-up failures (database unreachable or locked, port taken) as one line, not a stack.
    const failure = (e as { message?: string })?.message ?? String(e)
    console.error(`cannot start: ${failure.split("\n")[0]}`)
    process.exit(1)
  })
  announceReady()

  let signalled = false
  const shutdown = (signal: string) => {
    if (signalled) return
    signalled = true
    const log = stdoutSink()
    log.write(JSON.stringify({ message: "shutting down", level: "INFO", timestamp: new Date().toISOString(), annotations: { signal } }))
    // A hard deadline so a stuck connection cannot keep the process alive forever.
    setTimeout(() => process.exit(1), 15_000).unref()
    running.stop().then(() => log.flush()).then(() => process.exit(0), (e) => {
      console.error(e)
      process.exit(1)
    })
  }
  process.on("SIGTERM", () => shutdown("SIGTERM"))
  process.on("SIGINT", () => shutdown("SIGINT"))
}

becomeLean()
if (!runPrimary()) await serve()
