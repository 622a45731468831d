/**
 * Structured JSON logs, one object per line, with annotations (request_id, worker, …).
 * Nothing secret is ever passed to a log call: keys, passwords and tokens are logged by prefix
 * at most.
 */
import { Layer, Logger, References } from "effect"

const levels = { debug: "Debug", info: "Info", warn: "Warn", error: "Error" } as const

export const loggerLayer = (level: keyof typeof levels) =>
  Layer.mergeAll(
    Logger.layer([Logger.consoleJson]),
    Layer.succeed(References.MinimumLogLevel, levels[level]),
  )

/** Tests keep only errors, so a failing test's output stays readable. */
export const quietLoggerLayer = loggerLayer(process.env.TEST_LOG_LEVEL === "debug" ? "debug" : "error")
