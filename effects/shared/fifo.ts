/**
 * A first-in, first-out line on an array read from a moving head: `shift` is O(1) and never
 * leaves holes for later scans. A line under steady load may never empty, so the part already
 * taken is dropped once it is at least half the array (and 1,024 items).
 */
export interface Fifo<T> {
  readonly push: (item: T) => void
  /** The oldest item, left in the line. */
  readonly peek: () => T | undefined
  /** The oldest item, taken out. */
  readonly shift: () => T | undefined
  readonly size: () => number
}

export const fifo = <T>(): Fifo<T> => {
  let items: Array<T | undefined> = []
  let head = 0
  return {
    push: (item) => void items.push(item),
    peek: () => items[head],
    shift: () => {
      if (head === items.length) return undefined
      const item = items[head]
      items[head++] = undefined
      if (head === items.length) {
        items = []
        head = 0
      } else if (head >= 1024 && head * 2 >= items.length) {
        items = items.slice(head)
        head = 0
      }
      return item
    },
    size: () => items.length - head,
  }
}
