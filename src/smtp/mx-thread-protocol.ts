/**
 * What the MX's protocol thread (./mx-thread.ts) and its host on the event loop (./mx-threaded.ts)
 * say to each other. Each side posts what one turn of its event loop produced as one array
 * (src/ingest/turn-posts.ts): under load several sessions reach a step in the same turn.
 */
import type { SMTPServerOptions } from "smtp-server"
import type { DataRead } from "./data.ts"
import type { SmtpAnswer } from "./smtp-error.ts"
import type { TlsFacts } from "./tls-facts.ts"

/** The certificate the thread serves (STARTTLS), as PEM. */
export interface ThreadTls {
  readonly key: string
  readonly cert: string
}

export interface MxThreadData {
  /** The port to listen on (0: any; a restarted thread gets the first one's). */
  readonly port: number
  /**
   * Listen with SO_REUSEPORT: set in a node:cluster worker (WEB_CONCURRENCY), where a thread's
   * listen does not go through the cluster's shared handle, so each process's thread binds the
   * port itself and the kernel spreads connections between them.
   */
  readonly reusePort: boolean
  /** smtp-server's options that are plain values (./mx-options.ts `mxPlainOptions`). */
  readonly options: SMTPServerOptions
  /** Null: STARTTLS is not offered. */
  readonly tls: ThreadTls | null
  readonly maxSessionsPerIp: number
  readonly maxBytes: number
  readonly spoolDir: string
  /** Its spool files are named `<pid>-<spoolTag><random>.eml`: a dead thread's are found by it. */
  readonly spoolTag: string
  /** The process's SMTP_MEMORY_BYTES budget (src/smtp/budget.ts `MemoryBudget`). */
  readonly memory: { readonly capacity: number; readonly shared: SharedArrayBuffer }
  /** The thread's own count of what it holds of the budget (`ThreadBudget`). */
  readonly held: SharedArrayBuffer
}

/** A step the session needs the service for; the host answers it by `id`. */
export type Ask =
  | { readonly t: "mail"; readonly id: number; readonly sid: string }
  | { readonly t: "rcpt"; readonly id: number; readonly sid: string; readonly address: string }
  | {
    readonly t: "data"
    readonly id: number
    readonly sid: string
    /** Its bytes move to the host, and so does its share of the budget (`held`). */
    readonly read: DataRead
    readonly mailFrom: string
    readonly recipients: ReadonlyArray<string>
    readonly reusedConnection: boolean
    readonly client: { readonly ip: string; readonly helo: string; readonly tls: TlsFacts | null }
  }

export type FromThread =
  | Ask
  | { readonly t: "close"; readonly sid: string }
  | { readonly t: "ready"; readonly port: number }
  | { readonly t: "failed"; readonly message: string }
  | { readonly t: "log"; readonly level: "debug" | "error"; readonly message: string; readonly detail: string }
  | { readonly t: "closed" }

export type ToThread =
  /** No `error`: the step succeeded (`text`: the 250's text after the end of DATA). */
  | { readonly t: "answer"; readonly id: number; readonly error?: SmtpAnswer; readonly text?: string }
  | { readonly t: "tls"; readonly tls: ThreadTls }
  /** Stop listening, let the sessions in flight end (smtp-server's closeTimeout), then say `closed`. */
  | { readonly t: "stop" }
