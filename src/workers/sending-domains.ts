/**
 * Sending-domain re-check: every DOMAIN_RECHECK_INTERVAL each verified or suspended domain is
 * looked up again. Records gone or changed → suspended (mail can no longer be sent from it);
 * records back → verified. A DNS outage changes nothing. Domains are leased while checked, so
 * several instances share the work.
 */
import { Duration, Effect, Layer } from "effect"
import { AppConfig } from "../../effects/config.ts"
import type { SendingDomainRow } from "../../effects/sending-domains/schema.ts"
import { SendingDomains } from "../../effects/sending-domains/service.ts"
import { claimDue, type WorkerSpec, workerLayer } from "./worker.ts"

export const sendingDomainRecheckWorker = (interval: Duration.Input): WorkerSpec<SendingDomainRow> => ({
  name: "sending-domain-recheck",
  // Poll at least every minute so a domain is looked at soon after it falls due.
  pollInterval: Duration.min(Duration.fromInputUnsafe(interval), Duration.minutes(1)),
  batchSize: 20,
  concurrency: 4,
  claim: claimDue<SendingDomainRow>({
    table: "sending_domains",
    dueColumn: "next_check_at",
    statuses: ["verified", "suspended"],
    lease: "2 minutes",
  }),
  handle: (row) => Effect.asVoid(SendingDomains.use((domains) => domains.recheck(row))),
})

/** The worker at DOMAIN_RECHECK_INTERVAL. */
export const sendingDomainRecheckLayer = Layer.unwrap(
  AppConfig.useSync((config) => workerLayer(sendingDomainRecheckWorker(config.domainRecheckInterval))),
)
