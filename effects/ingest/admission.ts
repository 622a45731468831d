/**
 * Money promised but not yet taken. A recipient accepted at RCPT will cost 5 TZS when its message
 * commits, maybe seconds later; until then the wallet's balance still shows the money. Every
 * accepted copy is held here (per account, for this process) and the RCPT check counts what is
 * held, so 20 sessions cannot each be told "yes" for the same last 5 TZS. The batch commit stays
 * the authority: it re-checks the locked wallet, and a message that no longer fits gets 452.
 *
 * A hold lives in its SMTP transaction's `Envelope` and is released when the transaction ends
 * (message answered, RSET or a new MAIL FROM, connection closed), after the commit, so the
 * money is never counted as free while it is neither held nor debited.
 */
import { Context, Layer } from "effect"
import type { Destination } from "../addresses/schema.ts"
import type { VerpRecipient } from "../bounces/verp.ts"

/** A destination as accepted at RCPT, with the recipient as the client wrote it. */
export interface AdmittedDestination extends Destination {
  readonly rcpt: string
}

/** A return path accepted at RCPT (free of charge: nothing is held for it). */
export interface AdmittedReturnPath {
  readonly rcpt: string
  readonly recipient: VerpRecipient
}

/** What one SMTP transaction was admitted for. */
export interface Envelope {
  /** By address id, in RCPT order: each address gets one copy however many forms name it. */
  readonly destinations: Map<number, AdmittedDestination>
  /** By `<email_id>.<recipient_index>`: each outbound recipient's report is read once. */
  readonly returnPaths: Map<string, AdmittedReturnPath>
  /** TZS held per account for this transaction. */
  readonly held: Map<number, number>
}

/** The key of `Envelope.returnPaths`: one outbound recipient, however its return path is spelled. */
export const returnPathKey = (r: VerpRecipient): string => `${r.emailId}.${r.recipientIndex}`

export const newEnvelope = (): Envelope => ({ destinations: new Map(), returnPaths: new Map(), held: new Map() })

/** Nothing admitted and nothing held: ending the transaction has nothing to let go. */
export const isEmpty = (e: Envelope): boolean => e.held.size === 0 && e.destinations.size === 0 && e.returnPaths.size === 0

export interface ReservationsShape {
  /** TZS held for an account by every open transaction of this process. */
  readonly heldFor: (userId: number) => number
  readonly hold: (envelope: Envelope, userId: number, amount: number) => void
  /** Gives back everything the envelope holds and empties it. */
  readonly release: (envelope: Envelope) => void
}

export class Reservations extends Context.Service<Reservations, ReservationsShape>()("app/Reservations") {
  static readonly layer = Layer.sync(Reservations, () => {
    const held = new Map<number, number>()
    return Reservations.of({
      heldFor: (userId) => held.get(userId) ?? 0,
      hold: (envelope, userId, amount) => {
        held.set(userId, (held.get(userId) ?? 0) + amount)
        envelope.held.set(userId, (envelope.held.get(userId) ?? 0) + amount)
      },
      release: (envelope) => {
        for (const [userId, amount] of envelope.held) {
          const left = (held.get(userId) ?? 0) - amount
          if (left > 0) held.set(userId, left)
          else held.delete(userId)
        }
        envelope.held.clear()
        envelope.destinations.clear()
        envelope.returnPaths.clear()
      },
    })
  })
}
