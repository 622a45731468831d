/**
 * The real service (`node src/main.ts`) as a subprocess the crash trials can kill -9 and start
 * again on the same ports and database. It runs in a process group of its own, and a kill
 * signals the whole group: if the entry ever forks (cluster workers), none survives the "crash".
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as net from "node:net"
import * as path from "node:path"

export interface ServicePorts {
  readonly http: number
  readonly smtp: number
  readonly sandbox: number
  /** The sandbox's implicit-TLS listener (SANDBOX_SMTPS_PORT); unused by the trials but must not collide. */
  readonly smtps: number
}

export interface ServiceProcess {
  readonly ports: ServicePorts
  readonly url: string
  /** Spawns the process (does not wait). */
  readonly spawn: () => void
  /** Resolves once /readyz answers 200 and the MX port takes connections. */
  readonly ready: (timeoutMs?: number) => Promise<void>
  /** SIGKILL to the whole process group; resolves when every member is gone. */
  readonly kill9: () => Promise<void>
  /** SIGTERM (graceful stop); resolves with the exit code. */
  readonly stop: (timeoutMs?: number) => Promise<number | null>
  readonly running: () => boolean
  /** The last lines the process wrote (stdout and stderr). */
  readonly logTail: (lines?: number) => string
  /** Log lines at level ERROR (or on stderr) since the first start. */
  readonly errorLines: () => ReadonlyArray<string>
}

const repoRoot = path.resolve(import.meta.dirname, "../..")

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const connects = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect({ port, host: "127.0.0.1" })
    s.once("connect", () => {
      s.destroy()
      resolve(true)
    })
    s.once("error", () => resolve(false))
  })

const groupAlive = (pid: number) => {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

/** Process groups still running; killed if the test process exits first (a detached group would outlive it). */
const liveGroups = new Set<number>()
process.once("exit", () => {
  for (const pid of liveGroups) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch { /* gone */ }
  }
})

export const makeServiceProcess = (ports: ServicePorts, env: Record<string, string>): ServiceProcess => {
  let child: ChildProcess | undefined
  let exited: Promise<number | null> = Promise.resolve(null)
  let alive = false
  const tail: Array<string> = []
  const errors: Array<string> = []
  const url = `http://127.0.0.1:${ports.http}`

  const keep = (stream: "out" | "err") => {
    let partial = ""
    return (chunk: Buffer) => {
      partial += chunk.toString("utf8")
      let at: number
      while ((at = partial.indexOf("\n")) >= 0) {
        const line = partial.slice(0, at)
        partial = partial.slice(at + 1)
        tail.push(line)
        if (tail.length > 400) tail.splice(0, tail.length - 400)
        if (stream === "err" || /"level":"(ERROR|FATAL)"/.test(line)) errors.push(line.slice(0, 2000))
      }
    }
  }

  const childEnv = (): NodeJS.ProcessEnv => {
    const base: NodeJS.ProcessEnv = { ...process.env }
    // The embedded defaults stay as in development; production mode would demand settings we do not need.
    delete base.NODE_ENV
    delete base.TEST_DATABASE_URL
    return {
      ...base,
      ...env,
      PORT: String(ports.http),
      SMTP_PORT: String(ports.smtp),
      SANDBOX_SMTP_PORT: String(ports.sandbox),
      SANDBOX_SMTPS_PORT: String(ports.smtps),
    }
  }

  return {
    ports,
    url,
    spawn: () => {
      if (alive) throw new Error("the service is already running")
      const c = spawn(process.execPath, ["src/main.ts"], {
        cwd: repoRoot,
        env: childEnv(),
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
      })
      child = c
      alive = true
      if (c.pid) liveGroups.add(c.pid)
      c.stdout!.on("data", keep("out"))
      c.stderr!.on("data", keep("err"))
      exited = new Promise((resolve) =>
        c.once("exit", (code) => {
          alive = false
          if (c.pid && !groupAlive(c.pid)) liveGroups.delete(c.pid)
          resolve(code)
        })
      )
    },
    ready: async (timeoutMs = 60_000) => {
      const until = Date.now() + timeoutMs
      while (Date.now() < until) {
        if (!alive) throw new Error(`the service exited during start-up:\n${tail.slice(-30).join("\n")}`)
        try {
          const r = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) })
          await r.body?.cancel()
          if (r.ok && (await connects(ports.smtp))) return
        } catch { /* not up yet */ }
        await sleep(50)
      }
      throw new Error(`the service did not become ready within ${timeoutMs} ms:\n${tail.slice(-30).join("\n")}`)
    },
    kill9: async () => {
      const c = child
      if (!c?.pid) return
      try {
        process.kill(-c.pid, "SIGKILL")
      } catch { /* already gone */ }
      await exited
      while (groupAlive(c.pid)) await sleep(20)
      liveGroups.delete(c.pid)
    },
    stop: async (timeoutMs = 20_000) => {
      const c = child
      if (!c?.pid || !alive) return null
      c.kill("SIGTERM")
      const code = await Promise.race([exited, sleep(timeoutMs).then(() => "timeout" as const)])
      if (code === "timeout") {
        try {
          process.kill(-c.pid, "SIGKILL")
        } catch { /* gone */ }
        await exited
        throw new Error(`the service did not stop within ${timeoutMs} ms of SIGTERM`)
      }
      while (groupAlive(c.pid)) await sleep(20)
      liveGroups.delete(c.pid)
      return code
    },
    running: () => alive,
    logTail: (lines = 40) => tail.slice(-lines).join("\n"),
    errorLines: () => errors,
  }
}
