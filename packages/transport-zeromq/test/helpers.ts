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
