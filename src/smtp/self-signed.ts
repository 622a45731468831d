/**
 * The self-signed certificate of an MX host (RSA 2048, SHA-256, the host as CN and DNS name;
 * selfsigned 5.5 cannot make EC keys), made once per data directory, away from the service:
 * selfsigned brings ~600 ASN.1 modules (~35 MB resident) that the process, once the certificate
 * is in DATA_DIR, never needs again.
 *
 * In a process of its own (./self-signed-process.ts), as the first start's initdb is: made on a
 * thread, what the thread left behind still held the service's RSS 24–36 MiB higher 3 s after a
 * first start (238–250 against 212–214 MiB on PGlite, 219–232 after 10 s; bench/REPORT.md, HTTP
 * API). Where no process can be started (Deno without --allow-run), on a thread; where no thread
 * can start either, right here.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"
import { siblingModule } from "../module-url.ts"

export interface Pems {
  readonly private: string
  readonly cert: string
}

/** Makes the certificate in this thread (the worker's body, and the fallback). */
export const generateHere = (host: string, now: number): Promise<Pems> =>
  import("selfsigned").then(({ generate }) =>
    generate([{ name: "commonName", value: host }], {
      keySize: 2048,
      algorithm: "sha256",
      notBeforeDate: new Date(now),
      // 825 days: the longest validity TLS clients accept for a server certificate.
      notAfterDate: new Date(now + 825 * 86_400_000),
      extensions: [
        { name: "basicConstraints", cA: false },
        { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
        { name: "extKeyUsage", serverAuth: true },
        { name: "subjectAltName", altNames: [{ type: 2, value: host }] },
      ],
    })
  ).then((pems) => ({ private: pems.private, cert: pems.cert }))

type Answer = { readonly ok: true; readonly pems: Pems } | { readonly ok: false; readonly message: string }

/** A key takes well under a second; a child that has not answered by then is stuck. */
const PROCESS_TIMEOUT_MS = 60_000

/** Makes the certificate in a child process; rejects when that cannot be done (then a thread does it). */
export const generateInProcess = (host: string, now: number, timeoutMs = PROCESS_TIMEOUT_MS): Promise<Pems> =>
  new Promise<Pems>((resolve, reject) => {
    const script = fileURLToPath(siblingModule("./self-signed-process.ts", import.meta.url))
    const child = spawn(process.execPath, [script, host, String(now)], { stdio: ["ignore", "pipe", "pipe"] })
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    child.stdout.on("data", (b: Buffer) => out.push(b))
    child.stderr.on("data", (b: Buffer) => err.push(b))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.once("error", (e) => {
      clearTimeout(timer)
      reject(e)
    })
    child.once("close", (code, signal) => {
      clearTimeout(timer)
      try {
        if (code !== 0) throw new Error(`exited with ${signal ?? code}: ${Buffer.concat(err).toString().slice(-500)}`)
        const pems = JSON.parse(Buffer.concat(out).toString()) as Pems
        if (typeof pems.private !== "string" || typeof pems.cert !== "string") throw new Error("no certificate in its output")
        resolve({ private: pems.private, cert: pems.cert })
      } catch (e) {
        reject(e)
      }
    })
  })

/** Makes the certificate in a child process; on a thread where none can start, else here. */
export const generateSelfSigned = (host: string, now: number): Promise<Pems> =>
  generateInProcess(host, now).catch(() => generateOnThread(host, now))

/** Makes the certificate on a thread that ends with it; here when no thread can start. */
export const generateOnThread = (host: string, now: number): Promise<Pems> =>
  new Promise<Pems>((resolve, reject) => {
    let worker: Worker
    try {
      worker = new Worker(siblingModule("./self-signed-worker.ts", import.meta.url), { workerData: { host, now } })
    } catch {
      return resolve(generateHere(host, now))
    }
    // Whichever comes first answers: the thread's message, its failure to run (then here), its end.
    let settled = false
    const settle = (answer: () => void) => {
      if (settled) return
      settled = true
      answer()
    }
    worker.once("message", (a: Answer) => settle(() => (a.ok ? resolve(a.pems) : reject(new Error(a.message)))))
    worker.once("error", (e) => settle(() => resolve(generateHere(host, now).catch(() => Promise.reject(e)))))
    worker.once("exit", (code) => settle(() => reject(new Error(`the certificate thread exited with code ${code}`))))
  })
