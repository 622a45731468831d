/** The inbound address an AgentConfig belongs to: owner, full email (for the prompt) and creation time. */
import { Effect } from "effect"
import type { Forbidden, NotFound } from "../errors.ts"
import type { DatabaseShape, DbError } from "../ports/Database.ts"
import { owned } from "../shared/ownership.ts"

export interface AgentMailbox {
  readonly id: number
  readonly user_id: number
  readonly email: string
  readonly created_at: Date
}

const SELECT = `SELECT a.id, a.user_id, a.local_part, a.created_at, d.domain
                  FROM inbound_addresses a LEFT JOIN receiving_domains d ON d.id = a.domain_id WHERE a.id = $1`

/** Any account's address, or undefined when it is gone. */
export const mailboxById = (db: DatabaseShape, platformDomain: string, id: number): Effect.Effect<AgentMailbox | undefined, DbError> =>
  Effect.map(
    db.query<{ id: number; user_id: number; local_part: string; created_at: Date; domain: string | null }>(SELECT, [id]),
    ([row]) => row && { id: row.id, user_id: row.user_id, email: `${row.local_part}@${row.domain ?? platformDomain}`, created_at: row.created_at },
  )

/** The caller's address: 404 when missing, 403 when another account's. */
export const ownedMailbox = (
  db: DatabaseShape,
  platformDomain: string,
  userId: number,
  id: number,
): Effect.Effect<AgentMailbox, NotFound | Forbidden | DbError> =>
  Effect.flatMap(mailboxById(db, platformDomain, id), (row) => owned("address", row ? [row] : [], userId))
