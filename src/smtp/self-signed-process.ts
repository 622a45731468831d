/**
 * Run as a process of its own (see ./self-signed.ts): makes the self-signed certificate of the
 * host in argv and prints it on stdout as JSON, then ends.
 */
import { generateHere } from "./self-signed.ts"

const [host, now] = process.argv.slice(2)
const pems = await generateHere(host!, Number(now))
process.stdout.write(JSON.stringify(pems))
