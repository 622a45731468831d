/** The thread that makes a self-signed certificate and ends, where no process can start (see ./self-signed.ts). */
import { parentPort, workerData } from "node:worker_threads"
import { generateHere } from "./self-signed.ts"

const { host, now } = workerData as { host: string; now: number }
generateHere(host, now).then(
  (pems) => parentPort!.postMessage({ ok: true, pems }),
  (e) => parentPort!.postMessage({ ok: false, message: e instanceof Error ? e.message : String(e) }),
)
