/**
 * Ingest: what the MX server asks at RCPT (may this recipient get mail now?) and at the end of
 * DATA (store it). A message is stored once per account and once per recipient address, and each
 * address copy is charged 5 TZS; the rows, the debits and the follow-up work (MessageEvents) go
 * in one transaction, so the sender's 250 means all of it committed and a refusal means none.
 *
 * The expensive, per-message work (authentication, parsing, encoding the row) goes to the
 * MessagePreparer (worker threads, ./preparer.ts); the storing goes to the ingest actor
 * (./writer.ts), which commits many messages per transaction. RCPT lookups are batched per tick (./recipients.ts) and money
 * promised at RCPT is held until commit (./admission.ts).
 *
 * A VERP return path (bounces and complaints of outbound mail) is another class of recipient:
 * admitted free of charge (nothing held, no balance asked), and at the end of DATA the message
 * goes to the Bounces service for it, not to the writer. A message to both kinds is read as a
 * report first and then stored for its mailboxes, so a failure of the report answers a
 * temporary error before anything is stored or charged (the retry then stores it once).
 */
import { Clock, Context, Effect, Exit, Layer } from "effect"
import { type DomainSuspended, UnknownRecipient } from "../addresses/errors.ts"
import type { Destination } from "../addresses/schema.ts"
import { PRICE_PER_MESSAGE_TZS } from "../billing/service.ts"
import { Bounces } from "../bounces/service.ts"
import { AppConfig } from "../config.ts"
import { InsufficientBalance } from "../errors.ts"
import type { DbError } from "../ports/Database.ts"
import { MimeBlobs } from "../ports/MimeBlobs.ts"
import { randomHex } from "../shared/crypto.ts"
import { freeBytes } from "../shared/free-bytes.ts"
import { type AdmittedReturnPath, type AdmittedDestination, type Envelope, Reservations, returnPathKey } from "./admission.ts"
import { inMemory, isMessageBytes, type MessageBytes } from "./bytes.ts"
import { MessagePreparer } from "./preparer.ts"
import { Recipients } from "./recipients.ts"
import { pgSafe } from "./text.ts"
import type { Prepared } from "./store.ts"
import { IngestWriter } from "./writer.ts"

export interface Delivery {
  /** The message as received: bytes in memory, or wherever the SMTP server keeps them. */
  readonly raw: Uint8Array | MessageBytes
  /** MAIL FROM ('' for the null sender of bounces). */
  readonly mailFrom: string
  /** RCPT TO addresses as given, in order. */
  readonly recipients: ReadonlyArray<string>
  /** The SMTP connection already carried a message before this one (./prepare.ts `PrepareJob`). */
  readonly reusedConnection?: boolean
  /** The destinations admitted at RCPT (the MX session has them); looked up again when absent. */
  readonly destinations?: ReadonlyArray<AdmittedDestination>
  /** The return paths admitted at RCPT (given together with `destinations`). */
  readonly returnPaths?: ReadonlyArray<AdmittedReturnPath>
  readonly client: {
    readonly ip: string
    readonly helo: string
    /** Set when the session ran over TLS (the Received line then says ESMTPS). */
    readonly tls?: { readonly protocol: string; readonly cipher: string } | null
  }
}

export interface IngestShape {
  /**
   * RCPT-time check: the recipient reaches an address, its domain is not suspended, and the
   * wallet covers this copy on top of every copy already held (this transaction's and other
   * sessions' not yet committed). Records the destination and the hold in `envelope`. A valid return
   * path is recorded free of charge; a forged one is an UnknownRecipient.
   */
  readonly admit: (
    recipient: string,
    envelope: Envelope,
  ) => Effect.Effect<Destination | AdmittedReturnPath, UnknownRecipient | DomainSuspended | InsufficientBalance | DbError>
  /** Ends an SMTP transaction: what it held is free again. */
  readonly release: (envelope: Envelope) => Effect.Effect<void>
  /**
   * DATA-time: hands the message to Bounces for each return path, then authenticates, parses, and
   * stores + charges it for every recipient address; returns the stored message ids (none when
   * it went to return paths only).
   */
  readonly deliver: (delivery: Delivery) => Effect.Effect<
    ReadonlyArray<number>,
    UnknownRecipient | InsufficientBalance | DbError
  >
}

export class Ingest extends Context.Service<Ingest, IngestShape>()("app/Ingest") {
  static readonly layer = Layer.effect(
    Ingest,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const recipients = yield* Recipients
      const reservations = yield* Reservations
      const writer = yield* IngestWriter
      const bounces = yield* Bounces
      const preparer = yield* MessagePreparer
      const blobs = yield* MimeBlobs
      // Transaction ids for the Received line and logs: a random prefix per process and a
      // counter (a random draw per message cost more CPU than the id is worth).
      const idPrefix = yield* randomHex(4)
      let idSeq = 0
      const transactionId = () => idPrefix + ((idSeq++) >>> 0).toString(16).padStart(8, "0")

      // The per-message steps are untraced (no span): a span with its stack trace per RCPT and per
      // message measured as a few percent of the MX's event loop; the SMTP server logs its errors.
      const admit = Effect.fnUntraced(function*(recipient: string, envelope: Envelope) {
        const target = yield* recipients.lookup(recipient)
        if (target._tag === "ReturnPath") {
          const key = returnPathKey(target.recipient)
          const admitted = envelope.returnPaths.get(key) ?? { rcpt: recipient, recipient: target.recipient }
          envelope.returnPaths.set(key, admitted)
          return admitted
        }
        const { destination, balance } = target
        // The same address again (another spelling, a +tag) is the same copy: nothing more to pay.
        if (envelope.destinations.has(destination.addressId)) return destination
        const free = balance - reservations.heldFor(destination.userId)
        if (free < PRICE_PER_MESSAGE_TZS) {
          return yield* new InsufficientBalance({
            message: "the account cannot pay for this message",
            required_tzs: PRICE_PER_MESSAGE_TZS,
            balance_tzs: Math.max(0, free),
          })
        }
        reservations.hold(envelope, destination.userId, PRICE_PER_MESSAGE_TZS)
        envelope.destinations.set(destination.addressId, { ...destination, rcpt: recipient })
        return destination
      })

      const release = (envelope: Envelope) => Effect.sync(() => reservations.release(envelope))

      /**
       * Routes of the recipients that reach an address, one per address, and the return paths
       * among them (the path without an MX session).
       */
      const targetsOf = Effect.fnUntraced(function*(rcpts: ReadonlyArray<string>) {
        const byAddress = new Map<number, AdmittedDestination>()
        const byReturnPath = new Map<string, AdmittedReturnPath>()
        const found = yield* Effect.forEach(rcpts, (rcpt) =>
          recipients.lookup(rcpt).pipe(
            Effect.map((target) => [{ rcpt, target }]),
            Effect.catchTags({ UnknownRecipient: () => Effect.succeed([]), DomainSuspended: () => Effect.succeed([]) }),
          ), { concurrency: "unbounded" })
        for (const { rcpt, target } of found.flat()) {
          if (target._tag === "ReturnPath") {
            const key = returnPathKey(target.recipient)
            if (!byReturnPath.has(key)) byReturnPath.set(key, { rcpt, recipient: target.recipient })
          } else if (!byAddress.has(target.destination.addressId)) byAddress.set(target.destination.addressId, { ...target.destination, rcpt })
        }
        return { destinations: [...byAddress.values()], returnPaths: [...byReturnPath.values()] }
      })

      /** Each return path's report, read and recorded (free of charge). */
      const reportTo = Effect.fnUntraced(function*(message: MessageBytes, mailFrom: string, returnPaths: ReadonlyArray<AdmittedReturnPath>) {
        const raw = yield* Effect.promise(() => message.read())
        yield* Effect.forEach(returnPaths, (p) => bounces.process({ raw, mailFrom, recipient: p.recipient }), { discard: true })
      })

      /** The message authenticated, parsed and laid out as rows for the writer. */
      const prepare = Effect.fnUntraced(function*(d: Delivery, message: MessageBytes, destinations: ReadonlyArray<AdmittedDestination>) {
        const at = Number(yield* Clock.currentTimeMillis)
        const id = transactionId()
        const blob = blobs.placeFor(id, at, message.size)
        const source = message.source()
        const prepared = yield* preparer.prepare({
          source,
          mailFrom: d.mailFrom,
          client: { ip: d.client.ip, helo: d.client.helo, tls: d.client.tls ?? null },
          mta: config.mxHost,
          ...(d.reusedConnection ? { reusedConnection: true } : {}),
          id,
          at,
          ...(blob ? { blob } : {}),
        }).pipe(
          // Prepared here or on a thread (its copy then moved there, and this one is already empty),
          // those bytes are read by nobody else. Not on interruption: the parse may still be reading.
          Effect.onExit((exit) => (Exit.hasInterrupts(exit) ? Effect.void : Effect.sync(() => freeBytes(source._tag === "Memory" ? source.bytes : undefined)))),
        )
        return { destinations: destinations.map((r) => ({ ...r, rcpt: pgSafe(r.rcpt) })), message: prepared, at: new Date(at) } satisfies Prepared
      })

      const discardBody = (p: Prepared) => (p.message.bodyBlob ? blobs.discard([p.message.bodyBlob]) : Effect.void)

      const deliver = Effect.fnUntraced(function*(d: Delivery) {
        const message = isMessageBytes(d.raw) ? d.raw : inMemory(d.raw)
        const { destinations, returnPaths } = d.destinations ? { destinations: d.destinations, returnPaths: d.returnPaths ?? [] } : yield* targetsOf(d.recipients)
        if (destinations.length === 0 && returnPaths.length === 0) return yield* new UnknownRecipient({ address: d.recipients[0] ?? "" })
        if (returnPaths.length > 0) yield* reportTo(message, d.mailFrom, returnPaths)
        if (destinations.length === 0) return []
        const prepared = yield* prepare(d, message, destinations)
        const stored = yield* writer.submit(prepared).pipe(
          // A refusal stored nothing: its body's file goes too. Other failures may leave one (the
          // database may have committed before the error reached us); the start-up sweep decides.
          Effect.tapErrorTag("UnknownRecipient", () => discardBody(prepared)),
          Effect.tapErrorTag("InsufficientBalance", () => discardBody(prepared)),
        )
        return stored.map((m) => m.id)
      })

      return Ingest.of({ admit, release, deliver })
    }),
  )
}
