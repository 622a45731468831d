/**
 * The test files share their fork's process (vitest.config.ts, `isolate: false`): what one file
 * leaves in the process, the next file of that fork runs with. This keeps out the ways a file
 * would leave something behind that the next one cannot see: environment it set, modules or
 * timers it replaced, an msw interceptor it did not close.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..")
const self = path.relative(root, new URL(import.meta.url).pathname)

/** What a test file must not do in a shared process, with what to do instead. */
const FORBIDDEN: ReadonlyArray<readonly [RegExp, string]> = [
  [/process\.env(?:\.\w+|\[[^\]]+\])\s*(?:=(?!=)|\+=|\?\?=|\|\|=)|delete\s+process\.env|Object\.assign\(\s*process\.env/, "sets process.env (give a child process its env, or settings to the app)"],
  [/\bvi\.(?:mock|doMock|stubEnv|stubGlobal|useFakeTimers)\s*\(/, "replaces modules, globals or timers (use a layer, or the TestClock)"],
]

/** Test sources: the files vitest runs and the support modules they import. */
const sources = (): Array<string> =>
  fs.globSync("test/**/*.ts", { cwd: root }).filter((f) => f !== self).sort()

describe("test files in a shared process", () => {
  it("set no environment and replace no module, global or timer", () => {
    const found: Array<string> = []
    for (const file of sources()) {
      const text = fs.readFileSync(path.join(root, file), "utf8")
      for (const [pattern, what] of FORBIDDEN) if (pattern.test(text)) found.push(`${file}: ${what}`)
    }
    expect(found).toEqual([])
  })

  it("close every msw interceptor they set up", () => {
    const found: Array<string> = []
    for (const file of sources()) {
      const text = fs.readFileSync(path.join(root, file), "utf8")
      const servers = [...text.matchAll(/(?:const|let)\s+(\w+)\s*=\s*setupServer\(/g)].map((m) => m[1]!)
      for (const name of servers) if (!new RegExp(`\\b${name}\\.close\\(\\)`).test(text)) found.push(`${file}: ${name} is never closed`)
    }
    expect(found).toEqual([])
  })

  it("would see each of those", () => {
    const offending = [
      "process.env.PORT = '1'",
      'process.env["X"] ??= "y"',
      "delete process.env.HOME",
      "Object.assign(process.env, { A: '1' })",
      'vi.mock("../x.ts")',
      "vi.useFakeTimers()",
      'vi.stubEnv("A", "1")',
    ]
    for (const line of offending) expect(FORBIDDEN.some(([p]) => p.test(line)), line).toBe(true)
    for (const line of ["const port = process.env.PORT", "if (process.env.CI === '1') {}", "env: { ...process.env, A: '1' }"]) {
      expect(FORBIDDEN.some(([p]) => p.test(line)), line).toBe(false)
    }
  })
})
