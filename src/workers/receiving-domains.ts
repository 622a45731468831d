/** Receiving-domain re-check (a suspended domain's mail is deferred with 451 4.4.3). */
import type { Duration } from "effect"
import type { ReceivingDomainRow } from "../../effects/receiving-domains/schema.ts"
import { ReceivingDomains } from "../../effects/receiving-domains/service.ts"
import { type DomainRecheck, domainRecheckLayer, domainRecheckWorker } from "./domain-recheck.ts"

const recheck: DomainRecheck<ReceivingDomainRow, ReceivingDomains> = {
  name: "receiving-domain-recheck",
  table: "receiving_domains",
  recheck: (row) => ReceivingDomains.use((domains) => domains.recheck(row)),
}

export const receivingDomainRecheckWorker = (interval: Duration.Input) => domainRecheckWorker(recheck, interval)
export const receivingDomainRecheckLayer = domainRecheckLayer(recheck)
