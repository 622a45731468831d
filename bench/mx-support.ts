/**
 * Pieces of the MX benchmark (bench/mx.ts): processes (the service, the peers, smtp-source),
 * seeding a database before the service opens it, a probe that times end-of-DATA → 250, a paced
 * sender and a webhook receiver, and peak RSS from /proc.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import { connectSmtp, dataBlock } from "../test/support/smtp-client.ts"

export interface Proc {
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
  readonly output: () => string
}

/** `logFile`: the process writes its output straight to that file (nothing for this process to
 * drain, and nothing lost to the 20,000-character tail, e.g. with --trace-gc); `output()` is then empty. */
/** Processes `run` started that have not exited: a bench that dies of an error takes them along (no service left holding its ports). */
const running = new Set<ChildProcess>()
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL")
})

export const run = (command: string, args: ReadonlyArray<string>, env: Record<string, string> = {}, logFile?: string): Proc => {
  const log = logFile === undefined ? "pipe" : fs.openSync(logFile, "w")
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", log, log] })
  running.add(child)
  child.on("exit", () => running.delete(child))
  if (typeof log === "number") fs.closeSync(log)
  let output = ""
  child.stdout?.on("data", (d) => (output = (output + d).slice(-20_000)))
  child.stderr?.on("data", (d) => (output = (output + d).slice(-20_000)))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  return { child, exited, output: () => output }
}

export const waitUntil = async (ok: () => Promise<boolean> | boolean, ms: number, what: string) => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (await ok()) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`timed out waiting for ${what}`)
}

/** The pids of a process and all its descendants (WEB_CONCURRENCY forks workers; the primary runs no service). */
export const processTree = (pid: number): Array<number> => {
  let children: Array<string> = []
  try {
    children = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean)
  } catch { /* gone meanwhile */ }
  return [pid, ...children.flatMap((c) => processTree(Number(c)))]
}

/** A `kB` field of /proc/PID/status; 0 once the process is gone. */
const statusKiB = (pid: number, field: "VmHWM" | "VmRSS"): number => {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8")
    return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0)
  } catch {
    return 0
  }
}

/**
 * Peak resident set size of a process and its descendants so far (VmHWM), in MiB: for several
 * processes the sum of their peaks, an upper bound of the tree's peak at any one moment.
 */
export const peakRssMiB = (pid: number): number => Math.round(processTree(pid).reduce((n, p) => n + statusKiB(p, "VmHWM"), 0) / 1024)

/** Resident set size of a process and its descendants now, in MiB. */
export const rssMiB = (pid: number): number => Math.round(processTree(pid).reduce((n, p) => n + statusKiB(p, "VmRSS"), 0) / 1024)

/** CPU seconds (user + system) of one process so far, from /proc (clock ticks of 1/100 s); 0 once it is gone. */
const ownCpuSeconds = (pid: number): number => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return 0
  }
}

/**
 * CPU seconds (user + system) a process and its descendants have used so far. On a shared machine
 * the time a run takes depends on what else runs; the CPU it costs per message much less.
 */
export const cpuSeconds = (pid: number): number => processTree(pid).reduce((n, p) => n + ownCpuSeconds(p), 0)

/**
 * CPU seconds of every PostgreSQL server process (the postmaster's children: backends, WAL
 * writer, checkpointer): what the database spends on the load, which the service's own CPU does
 * not show. Processes that ended meanwhile are missed; backends of the service live as long as it.
 */
export const postgresCpuSeconds = (): number => {
  let total = 0
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim() !== "postgres") continue
    } catch {
      continue // gone meanwhile
    }
    total += ownCpuSeconds(Number(pid))
  }
  return total
}

export const quantile = (values: ReadonlyArray<number>, q: number): number => {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!
}

export interface SourceLoad {
  readonly port: number
  /** One smtp-source process per recipient, the sessions and messages split between them. */
  readonly recipients: ReadonlyArray<string>
  readonly sessions: number
  readonly messages: number
  readonly size: number
  /** Many messages per connection (-d), or one connection per message. */
  readonly reuse: boolean
}

/** Runs postfix `smtp-source` (separate processes); resolves with the wall-clock seconds. */
export const smtpSource = async (load: SourceLoad): Promise<number> => {
  const n = load.recipients.length
  const t0 = performance.now()
  const procs = load.recipients.map((to) =>
    run("/usr/sbin/smtp-source", [
      ...(load.reuse ? ["-d"] : []),
      "-s", String(Math.max(1, Math.round(load.sessions / n))),
      "-m", String(Math.max(1, Math.round(load.messages / n))),
      "-l", String(load.size),
      "-f", "bench@sender.example",
      "-M", "sender.example",
      "-S", "Ankara ya mwezi",
      "-t", to,
      `127.0.0.1:${load.port}`,
    ])
  )
  const ends: Array<number> = []
  const codes = await Promise.all(procs.map((p) => p.exited.then((c) => (ends.push(performance.now() - t0), c))))
  const seconds = (performance.now() - t0) / 1000
  // BENCH_ENDS=1: a run's rate is set by its last process; how far apart they end shows its tail.
  if (process.env.BENCH_ENDS === "1" && ends.length > 1) console.log(`ends (ms): ${ends.map((e) => e.toFixed(0)).join(" ")}`)
  const bad = codes.findIndex((c) => c !== 0)
  if (bad >= 0) throw new Error(`smtp-source exited ${codes[bad]}: ${procs[bad]!.output().slice(-500)}`)
  return seconds
}

const message = (to: string, i: number, size: number) =>
  `From: Probe <bench@sender.example>\r\nTo: ${to}\r\nSubject: probe ${i}\r\nMessage-ID: <probe-${i}-${Date.now()}@sender.example>\r\n` +
  `Date: ${new Date().toUTCString()}\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n${"x".repeat(Math.max(0, size - 300))}\r\n`

/**
 * One session sending back to back until `stop()`; each sample is the time from the final dot
 * to the 250, as a sender sees it under the load around it.
 */
export const probe = (port: number, to: string, size: number) => {
  const samples: Array<number> = []
  let running = true
  let sent = 0
  const done = (async () => {
    const smtp = await connectSmtp(port)
    await smtp.command("EHLO probe.sender.example")
    while (running) {
      await smtp.command("MAIL FROM:<bench@sender.example>")
      await smtp.command(`RCPT TO:<${to}>`)
      await smtp.command("DATA")
      const block = dataBlock(message(to, sent, size))
      smtp.write(block)
      const t = performance.now()
      const r = await smtp.reply()
      if (r.code === 250) {
        samples.push(performance.now() - t)
        sent++
      }
    }
    await smtp.command("QUIT").catch(() => undefined)
    smtp.destroy()
  })()
  return { samples, summary: () => "", stop: async () => ((running = false), await done, sent) }
}

/**
 * BENCH_STAGES=1, one-message loads: like `probe`, but each message on a new connection, and the
 * client's wait at each step recorded (connect → greeting, EHLO, MAIL, RCPT, DATA, dot → 250,
 * QUIT), to see where a one-message session's time goes beside the peer's.
 */
export const stageProbe = (port: number, to: string, size: number) => {
  const samples: Array<number> = []
  const stages: Record<string, Array<number>> = {}
  const note = (name: string, t: number) => (stages[name] ??= []).push(performance.now() - t)
  let running = true
  let sent = 0
  const done = (async () => {
    while (running) {
      let t = performance.now()
      const smtp = await connectSmtp(port, { waitGreeting: true })
      note("greeting", t)
      for (const [name, line] of [["ehlo", "EHLO probe.sender.example"], ["mail", "MAIL FROM:<bench@sender.example>"], ["rcpt", `RCPT TO:<${to}>`], ["data", "DATA"]] as const) {
        t = performance.now()
        await smtp.command(line)
        note(name, t)
      }
      smtp.write(dataBlock(message(to, sent, size)))
      t = performance.now()
      const r = await smtp.reply()
      if (r.code === 250) {
        samples.push(performance.now() - t)
        note("dot", t)
        sent++
      }
      t = performance.now()
      await smtp.command("QUIT").catch(() => undefined)
      note("quit", t)
      smtp.destroy()
    }
  })()
  const summary = () =>
    Object.entries(stages).map(([k, v]) => `${k} ${quantile(v, 0.5).toFixed(1)}/${quantile(v, 0.9).toFixed(1)}`).join(", ")
  return { samples, summary, stop: async () => ((running = false), await done, sent) }
}

/**
 * Sends `rate` messages per second for `seconds` over `connections` reused sessions; returns,
 * per stored message id, when its 250 arrived (performance.now()).
 */
export const pacedSender = async (port: number, to: string, rate: number, seconds: number, connections = 8) => {
  const accepted = new Map<number, number>()
  const total = rate * seconds
  const pool = await Promise.all(Array.from({ length: connections }, async () => {
    const smtp = await connectSmtp(port)
    await smtp.command("EHLO paced.sender.example")
    return smtp
  }))
  const free = [...pool]
  const waiters: Array<(s: (typeof pool)[number]) => void> = []
  const acquire = () => new Promise<(typeof pool)[number]>((r) => (free.length ? r(free.pop()!) : waiters.push(r)))
  const releaseConn = (s: (typeof pool)[number]) => (waiters.length ? waiters.shift()!(s) : free.push(s))
  const t0 = performance.now()
  const sends: Array<Promise<void>> = []
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / rate
    const wait = due - performance.now()
    if (wait > 0) await new Promise((r) => setTimeout(r, wait))
    const smtp = await acquire()
    sends.push((async () => {
      await smtp.command("MAIL FROM:<bench@sender.example>")
      await smtp.command(`RCPT TO:<${to}>`)
      await smtp.command("DATA")
      smtp.write(dataBlock(message(to, i, 2048)))
      const r = await smtp.reply()
      const at = performance.now()
      const id = Number(/stored as (\d+)/.exec(r.text)?.[1])
      if (r.code === 250 && id) accepted.set(id, at)
      releaseConn(smtp)
    })())
  }
  await Promise.all(sends)
  for (const s of pool) s.destroy()
  return accepted
}

/** An HTTP endpoint that notes when each webhook's message_id arrived (performance.now()). */
export const webhookReceiver = async () => {
  const received = new Map<number, number>()
  const server = http.createServer((req, res) => {
    let body = ""
    req.on("data", (d) => (body += d))
    req.on("end", () => {
      const at = performance.now()
      const id = Number((JSON.parse(body) as { message_id?: number }).message_id)
      if (id && !received.has(id)) received.set(id, at)
      res.writeHead(200).end("ok")
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hook`,
    received,
    close: () => new Promise<void>((r) => server.close(() => r())),
  }
}
