/** Reads of sending-domain rows shared by the SendingDomains service and SenderIdentities. */
import { Effect } from "effect"
import type { Forbidden, NotFound } from "../errors.ts"
import type { DatabaseShape, DbError } from "../ports/Database.ts"
import { owned } from "../shared/ownership.ts"
import type { SendingDomainRow } from "./schema.ts"

/** The caller's sending domain: 404 when there is none, 403 when it is another account's. */
export const ownedSendingDomain = (
  db: DatabaseShape,
  userId: number,
  id: number,
): Effect.Effect<SendingDomainRow, NotFound | Forbidden | DbError> =>
  Effect.flatMap(
    db.query<SendingDomainRow>("SELECT * FROM sending_domains WHERE id = $1", [id]),
    (rows) => owned("sending domain", rows, userId),
  )
