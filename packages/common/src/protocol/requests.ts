/**
 * The shapes of requests on the master's request port (docs/protocol.md): a clear request
 * `{enc: 'clear', load}` for the allow-listed commands, and a sealed one (`{enc: 'box', …}`, built
 * by @brine/crypt) for everything a minion sends once authenticated.
 */

/** Commands a clear request may carry; anything else is refused (DESIGN §3). */
export const CLEAR_COMMANDS = ['_auth', 'publish', 'wheel', 'runner'] as const
export type ClearCommand = (typeof CLEAR_COMMANDS)[number]

/** Commands a sealed minion request may carry. */
export const SEALED_COMMANDS = ['_return', '_minion_event', '_grains'] as const
export type SealedCommand = (typeof SEALED_COMMANDS)[number]

/** A request in the clear. */
export interface ClearRequest<L = Record<string, unknown>> {
  enc: 'clear'
  load: L
}

/** Wraps a load as a clear request, the one place the `{enc: 'clear'}` envelope is built. */
export function clearRequest<L>(load: L): ClearRequest<L> {
  return { enc: 'clear', load }
}

export const isClearCommand = (cmd: string): cmd is ClearCommand => (CLEAR_COMMANDS as readonly string[]).includes(cmd)
export const isSealedCommand = (cmd: string): cmd is SealedCommand => (SEALED_COMMANDS as readonly string[]).includes(cmd)

/**
 * Error names a master's sealed `{ok: false, error}` acknowledgement may carry that tell a minion what
 * to do with the request (docs/protocol.md); any other refusal is retried (a return is spooled).
 */
export const SEALED_REFUSALS = {
  /** Outside the master's `request_window` (or below its replay floor): re-seal with a fresh timestamp and send again. */
  stale: 'StaleRequestError',
  /** Never accepted, however often sent (a return for a job this minion was not sent, a jid never issued): drop it. */
  refused: 'ReturnRefusedError',
} as const
