/**
 * A prepare worker thread (see ./prepare-pool.ts): serves the jobs the main thread posts
 * (./prepare-serve.ts).
 */
import { parentPort } from "node:worker_threads"
import { servePrepare } from "./prepare-serve.ts"

servePrepare(parentPort!)
