/**
 * A real DNS server on loopback (dns2, UDP and TCP on the same random port) serving a zone the
 * test edits while the app runs. Point the app at it with `dnsServers: [dns.address]`. Names not
 * in the zone answer NXDOMAIN at once, so mail authentication never waits on the network.
 */
import dns2 from "dns2"
import * as fs from "node:fs"

const { Packet } = dns2

export type RecordType = "A" | "MX" | "TXT" | "AAAA" | "PTR" | "CNAME"

/**
 * A: "1.2.3.4"; MX: "10 mx.example" ; TXT: the text (split into 255-byte strings on the wire);
 * AAAA: "2001:db8::1"; PTR and CNAME: a host name.
 */
export type Zone = Record<string, Partial<Record<RecordType, ReadonlyArray<string>>>>

export interface TestDnsServer {
  /** `127.0.0.1:PORT`, the form DNS_SERVERS takes. */
  readonly address: string
  readonly port: number
  readonly set: (name: string, type: RecordType, values: ReadonlyArray<string>) => void
  /** Removes one record type of a name, or the whole name. */
  readonly remove: (name: string, type?: RecordType) => void
  readonly load: (zone: Zone) => void
  /** Makes every question about `name` answer SERVFAIL (an outage, not a missing record); `false` undoes it. */
  readonly fail: (name: string, failing?: boolean) => void
  /** Delays every answer about `name` by `ms` (a slow or distant resolver); 0 undoes it. */
  readonly slow: (name: string, ms: number) => void
  /** How many questions were answered (to prove lookups really went over DNS). */
  readonly queries: () => number
  /** The TTL of the records of `name` (1 second unless set). */
  readonly ttl: (name: string, seconds: number) => void
  /** Negative answers carry an SOA with this minimum TTL (RFC 2308); `undefined`: no SOA (the default). */
  readonly negativeTtl: (seconds: number | undefined) => void
  /** Answers over UDP arrive truncated (TC, no records), so resolvers must ask again over TCP. */
  readonly truncateUdp: (on: boolean) => void
  /** Questions answered over TCP. */
  readonly tcpQueries: () => number
  readonly close: () => Promise<void>
}

const norm = (name: string) => name.toLowerCase().replace(/\.$/, "")

const chunks = (text: string): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += 255) out.push(text.slice(i, i + 255))
  return out.length ? out : [""]
}

/** Loads a zone fixture (JSON) from `fixtures/dns/`. */
export const zoneFixture = (file: string): Zone =>
  JSON.parse(fs.readFileSync(new URL(`../../fixtures/dns/${file}`, import.meta.url), "utf8")) as Zone

export const startDnsServer = async (initial: Zone = {}): Promise<TestDnsServer> => {
  const zone = new Map<string, Map<RecordType, ReadonlyArray<string>>>()
  const failing = new Set<string>()
  const ttls = new Map<string, number>()
  let soaMinimum: number | undefined
  let truncating = false
  let answered = 0
  let overTcp = 0
  const set = (name: string, type: RecordType, values: ReadonlyArray<string>) => {
    const n = norm(name)
    if (!zone.has(n)) zone.set(n, new Map())
    zone.get(n)!.set(type, values)
  }
  const load = (z: Zone) => {
    for (const [name, types] of Object.entries(z)) {
      for (const [type, values] of Object.entries(types)) set(name, type as RecordType, values ?? [])
    }
  }
  load(initial)

  const delays = new Map<string, number>()
  const handle = (request: InstanceType<typeof Packet>, send: (r: InstanceType<typeof Packet>) => Promise<Buffer>, udp: boolean) => {
    const delay = delays.get(norm(request.questions[0]?.name ?? "")) ?? 0
    if (delay > 0) return void setTimeout(() => answer(request, send, udp), delay)
    answer(request, send, udp)
  }
  const answer = (request: InstanceType<typeof Packet>, send: (r: InstanceType<typeof Packet>) => Promise<Buffer>, udp: boolean) => {
    answered++
    if (!udp) overTcp++
    const response = Packet.createResponseFromRequest(request)
    const [question] = request.questions
    const name = norm(question?.name ?? "")
    const records = zone.get(name)
    if (failing.has(name)) {
      response.header.rcode = Packet.RCODE.SERVFAIL
      return void send(response)
    }
    if (udp && truncating) {
      response.header.tc = 1
      return void send(response)
    }
    const soa = () => {
      if (soaMinimum === undefined) return
      response.authorities.push({
        name: name.split(".").slice(-2).join("."),
        type: Packet.TYPE.SOA,
        class: Packet.CLASS.IN,
        ttl: 3600,
        primary: "ns.test",
        admin: "hostmaster.test",
        serial: 1,
        refresh: 3600,
        retry: 600,
        expiration: 86400,
        minimum: soaMinimum,
      } as never)
    }
    if (!question || !records) {
      response.header.rcode = Packet.RCODE.NXDOMAIN
      soa()
      return void send(response)
    }
    const base = { name: question.name, class: Packet.CLASS.IN, ttl: ttls.get(name) ?? 1 }
    if (question.type === Packet.TYPE.A) {
      for (const address of records.get("A") ?? []) response.answers.push({ ...base, type: Packet.TYPE.A, address } as never)
    } else if (question.type === Packet.TYPE.MX) {
      for (const mx of records.get("MX") ?? []) {
        const [priority, exchange] = mx.split(/\s+/)
        response.answers.push({ ...base, type: Packet.TYPE.MX, priority: Number(priority), exchange } as never)
      }
    } else if (question.type === Packet.TYPE.TXT) {
      for (const text of records.get("TXT") ?? []) response.answers.push({ ...base, type: Packet.TYPE.TXT, data: chunks(text) } as never)
    } else if (question.type === Packet.TYPE.AAAA) {
      for (const address of records.get("AAAA") ?? []) response.answers.push({ ...base, type: Packet.TYPE.AAAA, address } as never)
    } else if (question.type === Packet.TYPE.PTR || question.type === Packet.TYPE.CNAME) {
      const type = question.type === Packet.TYPE.PTR ? "PTR" : "CNAME"
      for (const domain of records.get(type) ?? []) response.answers.push({ ...base, type: question.type, domain } as never)
    }
    if (response.answers.length === 0) soa()
    void send(response)
  }

  const handler = (overUdp: boolean) =>
    ((request: InstanceType<typeof Packet>, send: (r: InstanceType<typeof Packet>) => Promise<Buffer>) => handle(request, send, overUdp)) as never
  /** Listens, or fails with the bind error (dns2 would only emit it, thrown as unhandled). */
  const listen = (server: ReturnType<typeof dns2.createServer>, options: Parameters<ReturnType<typeof dns2.createServer>["listen"]>[0]) =>
    new Promise<unknown>((resolve, reject) => {
      server.once("error", reject)
      server.listen(options).then(resolve, reject)
    })
  // The UDP port is the kernel's choice; the same number over TCP (where resolvers retry answers too
  // large for UDP) may already be taken by another socket, so a clash picks a new pair.
  const bind = async (attempt = 1): Promise<{ udp: ReturnType<typeof dns2.createServer>; tcp: ReturnType<typeof dns2.createServer>; port: number }> => {
    const udp = dns2.createServer({ udp: true, handle: handler(true) })
    const udpAddresses = await listen(udp, { udp: { port: 0, address: "127.0.0.1" } })
    const port = (udpAddresses as { udp: { port: number } }).udp.port
    const tcp = dns2.createServer({ tcp: true, handle: handler(false) })
    try {
      await listen(tcp, { tcp: { port, address: "127.0.0.1" } })
      return { udp, tcp, port }
    } catch (e) {
      await udp.close()
      if (attempt >= 20) throw e
      return bind(attempt + 1)
    }
  }
  const { udp, tcp, port } = await bind()

  return {
    address: `127.0.0.1:${port}`,
    port,
    set,
    remove: (name, type) => {
      if (type) zone.get(norm(name))?.delete(type)
      else zone.delete(norm(name))
    },
    load,
    fail: (name, on = true) => {
      if (on) failing.add(norm(name))
      else failing.delete(norm(name))
    },
    slow: (name, ms) => {
      if (ms > 0) delays.set(norm(name), ms)
      else delays.delete(norm(name))
    },
    queries: () => answered,
    ttl: (name, seconds) => void ttls.set(norm(name), seconds),
    negativeTtl: (seconds) => void (soaMinimum = seconds),
    truncateUdp: (on) => void (truncating = on),
    tcpQueries: () => overTcp,
    close: async () => {
      await Promise.all([udp.close(), tcp.close()])
    },
  }
}
