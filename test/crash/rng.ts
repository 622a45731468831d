/**
 * Seeded randomness for the crash trials: mulberry32, small and fast. Each concern (kill moments,
 * load shape, receiver answers) draws from its own stream derived from the one seed, so changing
 * how much load runs does not move the kill schedule.
 */
export interface Rng {
  /** Uniform in [0, 1). */
  readonly next: () => number
  /** Integer in [0, n). */
  readonly int: (n: number) => number
  /** Integer in [min, max]. */
  readonly between: (min: number, max: number) => number
  readonly chance: (p: number) => boolean
  readonly pick: <A>(items: ReadonlyArray<A>) => A
}

export const makeRng = (seed: number): Rng => {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n: number) => Math.floor(next() * n)
  return {
    next,
    int,
    between: (min, max) => min + int(max - min + 1),
    chance: (p) => next() < p,
    pick: (items) => items[int(items.length)]!,
  }
}

/** A stream of its own for one concern (`name`), derived from the run's seed. */
export const stream = (seed: number, name: string): Rng => {
  let h = seed >>> 0
  for (const c of name) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0
  return makeRng(h)
}
