/**
 * Operator CLI on the same settings and database as the service (not an HTTP surface):
 * `npm run admin -- <command> [args] [--flag value]`. Workers are not started.
 */
import { Effect } from "effect"
import { commands } from "./admin/index.ts"
import { loadSettings } from "./config.ts"
import { makeRuntime } from "./runtime.ts"

const [name, ...rest] = process.argv.slice(2)
const args: Array<string> = []
const flags: Record<string, string> = {}
for (let i = 0; i < rest.length; i++) {
  const a = rest[i]!
  if (a.startsWith("--")) flags[a.slice(2)] = rest[++i] ?? ""
  else args.push(a)
}

const command = commands.find((c) => c.name === name)
if (!command) {
  console.error(`usage: npm run admin -- <command>\n\n${commands.map((c) => `  ${c.usage.padEnd(40)} ${c.summary}`).join("\n")}`)
  process.exit(name ? 2 : 0)
}

const settings = await Effect.runPromise(Effect.result(loadSettings()))
if (settings._tag === "Failure") {
  console.error(settings.failure.message)
  process.exit(1)
}
const runtime = makeRuntime({ ...settings.success, logLevel: "warn" }, { workers: false })
const exit = await runtime.runPromiseExit(command.run(args, flags))
await runtime.dispose()
if (exit._tag === "Failure") {
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail") as { error?: { message?: string } } | undefined
  console.error(`error: ${failure?.error?.message ?? "unexpected failure (see logs)"}`)
  process.exit(1)
}
