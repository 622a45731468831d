/**
 * The self-signed certificate of an MX host (RSA 2048, SHA-256, the host as CN and DNS name;
 * selfsigned 5.5 cannot make EC keys), made on a thread of its own: selfsigned brings ~600 ASN.1
 * modules (~35 MB resident) that the process, once the certificate is in DATA_DIR, never needs
 * again, and a thread's memory goes back when it ends. Where a thread cannot start, it is made
 * right here.
 */
import { Worker } from "node:worker_threads"

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

/** Makes the certificate on a thread that ends with it; here when no thread can start. */
export const generateSelfSigned = (host: string, now: number): Promise<Pems> =>
  new Promise<Pems>((resolve, reject) => {
    let worker: Worker
    try {
      worker = new Worker(new URL("./self-signed-worker.ts", import.meta.url), { workerData: { host, now } })
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
