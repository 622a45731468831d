/** Reads of sending-domain rows shared by the SendingDomains service and SenderIdentities. */
import type { Effect } from "effect"
import type { Forbidden, NotFound } from "../errors.ts"
import type { DatabaseShape, DbError } from "../ports/Database.ts"
import { ownedDomain } from "../shared/domain-verification.ts"
import type { SendingDomainRow } from "./schema.ts"

/** The caller's sending domain: 404 when there is none, 403 when it is another account's. */
export const ownedSendingDomain = (
  db: DatabaseShape,
  userId: number,
  id: number,
): Effect.Effect<SendingDomainRow, NotFound | Forbidden | DbError> => ownedDomain<SendingDomainRow>(db, "sending_domains", "sending domain", userId, id)
