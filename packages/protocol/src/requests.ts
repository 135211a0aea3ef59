/**
 * The shapes of requests on the master's request port (docs/protocol.md): a clear request
 * `{enc: 'clear', load}` for the allow-listed commands, and a sealed one (`{enc: 'box', …}`, built
 * by @brine/crypt) for everything a minion sends once authenticated.
 */

/**
 * Commands a clear request may carry; anything else is refused (DESIGN §3). `mk_token`, `get_token`
 * and `rm_token` are Salt's eauth token flow (the last one Brine's: revoke a token one holds);
 * `fire_event` puts an event on the master's bus for a root-key caller (the REST API's webhooks); `preview_target`
 * answers the minions a publish would expect, publishing nothing (Salt's `--preview-target`).
 */
export const CLEAR_COMMANDS = ['_auth', 'publish', 'preview_target', 'wheel', 'runner', 'mk_token', 'get_token', 'rm_token', 'fire_event'] as const
export type ClearCommand = (typeof CLEAR_COMMANDS)[number]

/** Commands a sealed request may carry: a minion's (its file server requests too), and a syndic's (which authenticates as a minion does). */
export const SEALED_COMMANDS = [
  '_return',
  '_minion_event',
  '_grains',
  '_syndic_return',
  '_syndic_event',
  // The file server's (protocol/files.ts): reading file_roots, and cp.push.
  '_serve_file',
  '_file_hash',
  '_file_list',
  '_dir_list',
  '_file_envs',
  '_file_recv',
] as const
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
  /** Over the master's max_frame_entries or max_frame_depth once unsealed: no retry of the same load fits; drop it. */
  overBound: 'FrameLimitError',
} as const
