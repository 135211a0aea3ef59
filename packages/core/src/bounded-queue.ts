import { InvalidOperationError } from './errors.js'

export type OverflowPolicy = 'drop-newest' | 'drop-oldest'

/**
 * A FIFO with a hard capacity and a drop counter: a full queue drops (the newest item by default,
 * as ZeroMQ does at its high-water mark) instead of growing. It is also a single-consumer async
 * iterator that ends once `end()` is called and the queue is empty.
 */
export class BoundedQueue<T> implements AsyncIterable<T> {
  private items: T[] = []
  private head = 0
  private waiter: ((result: IteratorResult<T>) => void) | undefined
  private ended = false
  private iterated = false
  /** Items refused or evicted because the queue was full. */
  dropped = 0

  constructor(
    readonly capacity: number,
    private readonly policy: OverflowPolicy = 'drop-newest',
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`queue capacity must be a positive integer, got ${capacity}`)
  }

  get size(): number {
    return this.items.length - this.head
  }

  get isEnded(): boolean {
    return this.ended
  }

  /** Adds an item; returns false when it (or, under drop-oldest, an older item) was dropped. */
  push(item: T): boolean {
    if (this.ended) return false
    if (this.waiter !== undefined) {
      const resolve = this.waiter
      this.waiter = undefined
      resolve({ value: item, done: false })
      return true
    }
    if (this.size >= this.capacity) {
      this.dropped++
      if (this.policy === 'drop-newest') return false
      this.shift()
      this.items.push(item)
      return false
    }
    this.items.push(item)
    return true
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items[this.head]!
    this.items[this.head] = undefined as T
    this.head++
    // Compact now and then so a long-lived queue does not keep a growing array of holes.
    if (this.head > 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }

  /** Removes and returns everything queued. */
  drain(): T[] {
    const out = this.items.slice(this.head)
    this.items = []
    this.head = 0
    return out
  }

  /** No more items: a waiting consumer gets `done` once what is queued has been read. */
  end(): void {
    this.ended = true
    if (this.waiter !== undefined) {
      const resolve = this.waiter
      this.waiter = undefined
      resolve({ value: undefined, done: true })
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.iterated) throw new InvalidOperationError('this stream has one consumer and is already being iterated')
    this.iterated = true
    return {
      next: () => {
        if (this.size > 0) return Promise.resolve({ value: this.shift() as T, done: false })
        if (this.ended) return Promise.resolve({ value: undefined, done: true })
        if (this.waiter !== undefined) return Promise.reject(new InvalidOperationError('next() called again before the previous call resolved'))
        return new Promise((resolve) => {
          this.waiter = resolve
        })
      },
      return: () => {
        this.end()
        this.drain()
        return Promise.resolve({ value: undefined, done: true })
      },
    }
  }
}
