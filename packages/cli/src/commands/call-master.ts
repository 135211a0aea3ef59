import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadTransport } from '@brine/common'
import { mastersOf, timeoutsFromConfig, type MinionConfig } from '@brine/config'
import { loadOrCreateKeys } from '@brine/crypt'
import { authIdOf, linkOptionsOf, MasterLink, type MasterChannel, type MasterLinkEvent } from '@brine/minion'
import type { Logger } from '@brine/core'
import { CallAuthError } from '../errors.js'

/** What `brine-call`'s modules reach the master through: its file server, and events fired on its bus. */
export interface CallMaster {
  channel: MasterChannel
  fireMaster: (events: { tag: string; data: Record<string, unknown> }[]) => Promise<void>
  close(): Promise<void>
}

/**
 * Salt's `salt-call` with a master: a link that only makes requests (no publishes), authenticated with the
 * minion's own keys to the first master of its config; its spool is a directory of its own, since `brine-call`
 * returns nothing to the master and must not send what the daemon spooled. Resolves once authenticated; a key
 * waiting for acceptance or rejected ends it at once (CallAuthError), as Salt's salt-call exits then, and so
 * does a master that has not answered within `auth_timeout` × `auth_tries`.
 */
export async function connectCallMaster(opts: MinionConfig, logger: Logger, signal?: AbortSignal): Promise<CallMaster> {
  const id = authIdOf(opts)
  const masters = mastersOf(opts)
  const { keys } = await loadOrCreateKeys(opts.pki_dir, 'minion', { logger })
  const transport = await loadTransport(opts.transport)
  const spool = await mkdtemp(join(tmpdir(), 'brine-call-spool-'))
  const controller = new AbortController()
  const onAbort = (): void => controller.abort(signal?.reason)
  signal?.addEventListener('abort', onAbort, { once: true })
  const options = linkOptionsOf(opts, masters[0]!, 0, { id, keys, transport, several: masters.length > 1 })
  const link = new MasterLink({ ...options, spoolDir: spool, requestsOnly: true, logger, signal: controller.signal })
  const close = async (): Promise<void> => {
    signal?.removeEventListener('abort', onAbort)
    await link.close()
    await rm(spool, { recursive: true, force: true })
  }
  try {
    await link.start()
    await authenticatedOrRefused(link, options.authTimeoutMs * Math.max(1, opts.auth_tries))
  } catch (error) {
    await close()
    throw error
  }
  return {
    channel: { request: (load, requestOptions) => link.request({ ...load, id }, requestOptions) },
    fireMaster: (events) => link.send({ cmd: '_minion_event', id, events }, { tries: 1 }),
    close,
  }
}

/** Waits for the link's first auth; a pending or rejected key, or no answer within `boundMs`, is a CallAuthError. */
async function authenticatedOrRefused(link: MasterLink, boundMs: number): Promise<void> {
  const watching = new AbortController()
  const refusal = (async (): Promise<never> => {
    for await (const event of link.events()) {
      const reason = refusalOf(event)
      if (reason !== undefined) throw new CallAuthError(link.master, reason)
      if (watching.signal.aborted) break
    }
    throw new CallAuthError(link.master, 'the link closed before it authenticated')
  })()
  refusal.catch(() => {})
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CallAuthError(link.master, `no answer within ${boundMs} ms (auth_timeout × auth_tries)`)), boundMs)
  })
  try {
    await Promise.race([link.authenticated, refusal, timeout])
  } finally {
    clearTimeout(timer)
    watching.abort()
  }
}

function refusalOf(event: MasterLinkEvent): string | undefined {
  if (event.type === 'auth-pending') return 'its key waits for acceptance (brine-key -a); has the minion key been accepted?'
  if (event.type === 'auth-rejected') return `its key was refused (${event.reason})`
  return undefined
}
