/**
 * TLS of the SMTP servers (DECISIONS.md "TLS on the SMTP servers"): STARTTLS on the MX and the
 * sandbox, implicit TLS on the sandbox's SANDBOX_SMTPS_PORT.
 *
 * The certificate comes from TLS_CERT_FILE / TLS_KEY_FILE (PEM), re-read on SIGHUP so a renewed
 * certificate (certbot, an ACME client) is served without a restart; a bad file at reload keeps
 * the one in use. Without them, outside production, a self-signed certificate for MX_HOST is made
 * once into DATA_DIR and reused by every later start (and every instance sharing DATA_DIR), so
 * TLS works on a laptop with nothing configured. In production without them nothing is made up:
 * STARTTLS is not offered, and start-up says so.
 *
 * Each server records the TLS facts of a session ({protocol, cipher}) when its handshake
 * completes, for the stored message.
 */
import { Clock, Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as tls from "node:tls"
import type { SMTPServer, SMTPServerOptions, SMTPServerSession } from "smtp-server"
import type { Settings } from "../../effects/config.ts"
import { generateSelfSigned } from "./self-signed.ts"
import { type TlsFacts, tlsSessions } from "./tls-facts.ts"

export { factsOf, type TlsFacts } from "./tls-facts.ts"

/** The certificate cannot be read, does not parse, or does not match its key. */
export class TlsUnavailable extends Schema.TaggedError<TlsUnavailable>()("TlsUnavailable", { message: Schema.String }) {}

export interface TlsMaterial {
  readonly key: string
  readonly cert: string
  /** `files` (TLS_CERT_FILE / TLS_KEY_FILE) or `generated` (self-signed, in DATA_DIR). */
  readonly source: "files" | "generated"
}

/** Rejects a key and certificate that do not parse or do not belong together. */
const checked = (m: TlsMaterial, where: string) =>
  Effect.try({
    try: () => {
      tls.createSecureContext({ key: m.key, cert: m.cert })
      return m
    },
    catch: (e) => new TlsUnavailable({ message: `${where}: ${e instanceof Error ? e.message : String(e)}` }),
  })

const readText = (file: string, what: string) =>
  Effect.try({
    try: () => fs.readFileSync(file, "utf8"),
    catch: (e) => new TlsUnavailable({ message: `${what} ${file} cannot be read: ${e instanceof Error ? e.message : String(e)}` }),
  })

export const readTlsFiles = (certFile: string, keyFile: string): Effect.Effect<TlsMaterial, TlsUnavailable> =>
  Effect.gen(function*() {
    const cert = yield* readText(certFile, "TLS_CERT_FILE")
    const key = yield* readText(keyFile, "TLS_KEY_FILE")
    return yield* checked({ key, cert, source: "files" }, "TLS_CERT_FILE / TLS_KEY_FILE")
  })

/**
 * Where the generated certificate of `host` is kept: a directory per host (a new MX_HOST gets its
 * own) holding the key and the certificate, which appears whole or not at all (`selfSigned`).
 */
export const generatedFiles = (dataDir: string, host: string) => {
  const dir = path.join(dataDir, "tls", host.toLowerCase().replace(/[^a-z0-9.-]/g, "_"))
  return { dir, cert: path.join(dir, "cert.pem"), key: path.join(dir, "key.pem") }
}

/** Makes a pair and puts it in place; when another instance put its pair there first, theirs stays. */
const generateInto = (files: ReturnType<typeof generatedFiles>, host: string, now: number) =>
  Effect.gen(function*() {
    const pems = yield* Effect.tryPromise({
      // On a thread of its own, once per data directory (./self-signed.ts says why).
      try: () => generateSelfSigned(host, now),
      catch: (e) => new TlsUnavailable({ message: `cannot generate a certificate for ${host}: ${String(e)}` }),
    })
    yield* Effect.try({
      try: () => {
        // Written and flushed in a directory of its own, then renamed into place in one step: a
        // process killed midway leaves a stray `.new-*` directory, never a half-written pair.
        fs.mkdirSync(path.dirname(files.dir), { recursive: true, mode: 0o700 })
        const staging = fs.mkdtempSync(path.join(path.dirname(files.dir), ".new-"))
        try {
          for (const [name, text, mode] of [["key.pem", pems.private, 0o600], ["cert.pem", pems.cert, 0o644]] as const) {
            const fd = fs.openSync(path.join(staging, name), "wx", mode)
            try {
              fs.writeFileSync(fd, text)
              fs.fsyncSync(fd)
            } finally {
              fs.closeSync(fd)
            }
          }
          fs.renameSync(staging, files.dir)
        } catch (e) {
          // A non-empty directory is not replaced: another instance got there first; read theirs.
          const code = (e as NodeJS.ErrnoException).code
          fs.rmSync(staging, { recursive: true, force: true })
          if (code !== "ENOTEMPTY" && code !== "EEXIST") throw e
        }
      },
      catch: (e) => new TlsUnavailable({ message: `cannot keep the generated certificate in ${files.dir}: ${String(e)}` }),
    })
  })

/**
 * The self-signed certificate of `host` in `dataDir`: made the first time (./self-signed.ts),
 * read back every later time.
 */
export const selfSigned = (dataDir: string, host: string): Effect.Effect<TlsMaterial, TlsUnavailable> =>
  Effect.gen(function*() {
    const files = generatedFiles(dataDir, host)
    if (!fs.existsSync(files.dir)) yield* generateInto(files, host, Number(yield* Clock.currentTimeMillis))
    const cert = yield* readText(files.cert, "generated certificate")
    const key = yield* readText(files.key, "generated key")
    return yield* checked({ key, cert, source: "generated" }, `generated certificate in ${files.dir}`)
  })

/** What the SMTP servers serve: the files, else (outside production) the generated certificate, else nothing. */
export const loadTls = (settings: Settings): Effect.Effect<Option.Option<TlsMaterial>, TlsUnavailable> => {
  if (Option.isSome(settings.tlsCertFile) && Option.isSome(settings.tlsKeyFile)) {
    return Effect.map(readTlsFiles(settings.tlsCertFile.value, settings.tlsKeyFile.value), Option.some)
  }
  if (settings.production) return Effect.succeed(Option.none())
  return Effect.map(selfSigned(settings.dataDir, settings.mxHost), Option.some)
}

/** One SMTP server's TLS: the options to spread into it, its sessions' facts, and reloads. */
export interface SmtpTls {
  /** False in production without certificate files: STARTTLS is not offered. */
  readonly enabled: boolean
  /** Spread into the SMTPServer options (certificate, and the handshake hook that records facts). */
  readonly options: Pick<SMTPServerOptions, "key" | "cert" | "onSecure">
  /** The session's TLS facts, null while it is plaintext. */
  readonly facts: (session: SMTPServerSession) => TlsFacts | null
  /** Drops a closed session's facts. */
  readonly forget: (session: SMTPServerSession) => void
  /**
   * Serves re-read certificates on SIGHUP from now on (`server` is smtp-server, or what hands the
   * certificate to the MX's thread); returns the function that stops it.
   */
  readonly attach: (server: Pick<SMTPServer, "updateSecureContext">) => () => void
}

/** Where the TLS module runs its effects (the app's ManagedRuntime); they need no service. */
export interface Runner {
  readonly runPromise: <A, E>(effect: Effect.Effect<A, E, never>) => Promise<A>
}

/**
 * Loads the certificate for server `name` (start-up fails on unusable files) and warns, saying
 * `without` (what the server does instead), when there is none to serve.
 */
export const smtpTls = async (
  runtime: Runner,
  settings: Settings,
  name: string,
  without = "STARTTLS is not offered",
): Promise<SmtpTls> => {
  const loaded = await runtime.runPromise(
    loadTls(settings).pipe(
      Effect.tap(Option.match({
        onNone: () => Effect.logWarning(`${name}: ${without} (NODE_ENV=production and TLS_CERT_FILE / TLS_KEY_FILE are not set)`),
        onSome: (m) => Effect.logDebug(`${name}: TLS certificate loaded`).pipe(Effect.annotateLogs({ source: m.source })),
      })),
    ),
  )
  const { onSecure, facts, forget } = tlsSessions()
  if (Option.isNone(loaded)) {
    return { enabled: false, options: {}, facts, forget, attach: () => () => undefined }
  }

  const attach = (server: Pick<SMTPServer, "updateSecureContext">) => {
    const reload = () =>
      runtime.runPromise(
        loadTls(settings).pipe(
          Effect.tap(Option.match({
            onNone: () => Effect.void,
            onSome: (m) =>
              Effect.sync(() => server.updateSecureContext({ key: m.key, cert: m.cert })).pipe(
                Effect.andThen(Effect.logInfo(`${name}: TLS certificate reloaded (SIGHUP)`)),
              ),
          })),
          // A renewal half-written or broken: keep serving the certificate in use.
          Effect.catchTag("TlsUnavailable", (e) => Effect.logError(`${name}: TLS reload failed, keeping the current certificate: ${e.message}`)),
        ),
      ).catch(() => undefined)
    process.on("SIGHUP", reload)
    return () => void process.off("SIGHUP", reload)
  }

  return { enabled: true, options: { key: loaded.value.key, cert: loaded.value.cert, onSecure }, facts, forget, attach }
}
