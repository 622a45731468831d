/**
 * The one ownership rule (DECISIONS.md "Envelope and HTTP"): a row that does not exist is
 * NOT_FOUND, a row of another account is FORBIDDEN, and nothing of it is returned.
 */
import { Effect } from "effect"
import { Forbidden, NotFound } from "../errors.ts"
import type { DatabaseShape, DbError } from "../ports/Database.ts"

export const owned = <T extends { readonly user_id: number }>(
  what: string,
  rows: ReadonlyArray<T>,
  userId: number,
): Effect.Effect<T, NotFound | Forbidden> =>
  rows[0] === undefined
    ? Effect.fail(new NotFound({ message: `${what} not found` }))
    : rows[0].user_id !== userId
    ? Effect.fail(new Forbidden({ message: `${what} belongs to another account` }))
    : Effect.succeed(rows[0])

/** The caller's inbound address (id and owner only), for capabilities attached to addresses. */
export const ownedAddress = (
  db: DatabaseShape,
  userId: number,
  addressId: number,
): Effect.Effect<{ readonly user_id: number }, NotFound | Forbidden | DbError> =>
  Effect.flatMap(
    db.query<{ user_id: number }>("SELECT user_id FROM inbound_addresses WHERE id = $1", [addressId]),
    (rows) => owned("address", rows, userId),
  )
