import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { MasterUnresolvedError } from './errors.js'

/** A name lookup that takes longer than this is not waited for: the transport's connect decides then. */
const LOOKUP_BOUND_MS = 3000

/**
 * Checks that the `master:` name resolves, before a transport spends its connect timeout on it: an
 * unresolvable name otherwise shows only as "timed out". Throws MasterUnresolvedError carrying the
 * resolver's error (ENOTFOUND, EAI_AGAIN, …); an address literal is not looked up, and a lookup slower
 * than its bound is let through. Resolves to the addresses found.
 */
export async function resolveMaster(host: string, signal?: AbortSignal): Promise<string[]> {
  if (isIP(host) !== 0) return [host]
  const bound = new AbortController()
  const onAbort = (): void => bound.abort()
  signal?.addEventListener('abort', onAbort, { once: true })
  try {
    const found = await Promise.race([
      lookup(host, { all: true }).then((entries) => entries.map((entry) => entry.address)),
      sleep(LOOKUP_BOUND_MS, undefined, { signal: bound.signal }).then(
        () => [] as string[],
        () => [] as string[],
      ),
    ])
    return found
  } catch (error) {
    const cause = error as NodeJS.ErrnoException
    throw new MasterUnresolvedError(host, cause.message ?? String(error), { cause })
  } finally {
    bound.abort()
    signal?.removeEventListener('abort', onAbort)
  }
}
