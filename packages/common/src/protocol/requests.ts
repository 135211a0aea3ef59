/**
 * The shapes of requests on the master's request port (docs/protocol.md): a clear request
 * `{enc: 'clear', load}` for the allow-listed commands, and a sealed one (`{enc: 'box', …}`, built
 * by @brine/crypt) for everything a minion sends once authenticated.
 */

/** Commands a clear request may carry; anything else is refused (DESIGN §3). */
export const CLEAR_COMMANDS = ['_auth', 'publish', 'wheel', 'runner'] as const
export type ClearCommand = (typeof CLEAR_COMMANDS)[number]

/** Commands a sealed request may carry: a minion's, and a syndic's (which authenticates as a minion does). */
export const SEALED_COMMANDS = ['_return', '_minion_event', '_grains', '_syndic_return', '_syndic_event'] as const
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
