import { Socket } from 'node:net'
import { afterEach } from 'vitest'
import { deadline } from '@brine/testkit'

export const HOST = '127.0.0.1'

/** Endpoints closed after each test, newest first. */
const cleanup: Array<{ close(): Promise<void> }> = []

afterEach(async () => {
  const endpoints = cleanup.splice(0).reverse()
  await deadline(Promise.all(endpoints.map((endpoint) => endpoint.close())), 10_000, 'endpoints to close after the test')
})

export function track<T extends { close(): Promise<void> }>(endpoint: T): T {
  cleanup.push(endpoint)
  return endpoint
}

/** Reads the next `n` values from an async iterator. */
export async function take<T>(iterator: AsyncIterator<T>, n: number, what: string, ms = 10_000): Promise<T[]> {
  const values: T[] = []
  await deadline(
    (async () => {
      while (values.length < n) {
        const result = await iterator.next()
        if (result.done === true) throw new Error(`stream ended after ${values.length} of ${n} values`)
        values.push(result.value)
      }
    })(),
    ms,
    what,
  )
  return values
}

/**
 * Runs `work` while counting what the server's end of each link on `port` hands to the kernel: the
 * parts of each writev, or 1 for a single write. Resolves to those counts, in order; `work` sees them as they come.
 */
export async function handOvers(port: number, work: (handed: readonly number[]) => Promise<void>): Promise<number[]> {
  const handed: number[] = []
  const proto = Socket.prototype as unknown as Record<'_writev' | '_write', (this: Socket, ...args: unknown[]) => void>
  const { _writev: writev, _write: write } = proto
  proto._writev = function (this: Socket, chunks: unknown, ...rest: unknown[]) {
    if (this.localPort === port) handed.push((chunks as unknown[]).length)
    writev.call(this, chunks, ...rest)
  }
  proto._write = function (this: Socket, ...args: unknown[]) {
    if (this.localPort === port) handed.push(1)
    write.apply(this, args)
  }
  try {
    await work(handed)
  } finally {
    proto._writev = writev
    proto._write = write
  }
  return handed
}
