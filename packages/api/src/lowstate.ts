import { DEFAULT_SUBSET_SIZE, parseSubsetSize, SubsetSizeError, type ClientCredentials, type RequestOrigin } from '@brine/client'
import { msFromSeconds } from '@brine/config'
import { TARGET_TYPES, type TargetType, type Tgt } from '@brine/protocol'
import { API_CLIENTS, type ApiSettings } from './config.js'
import { ApiError } from './errors.js'
import type { ApiMasterClient } from './api-master-client.js'

/** One lowstate chunk: Salt's `{client, fun, tgt, arg, kwarg, …}` with its credentials. */
export type Chunk = Record<string, unknown>

/** Who calls (their credentials) and from where (the HTTP caller's address), passed with every client call. */
interface Who {
  credentials: ClientCredentials
  origin: RequestOrigin
}

/** Keys of a chunk that are not arguments of the function it calls. */
const RESERVED = new Set([
  'client',
  'fun',
  'tgt',
  'tgt_type',
  'expr_form',
  'arg',
  'kwarg',
  'timeout',
  'ret',
  'full_return',
  'token',
  'eauth',
  'username',
  'password',
  'batch',
  'batch_wait',
  'subset',
])

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
const isHex = (value: unknown): boolean => typeof value === 'string' && /^[0-9a-fA-F]+$/.test(value)

/** The chunk's credentials (a hex token, or an eauth trio); 401 when there are none or the token is not hex. */
export function chunkCredentials(chunk: Chunk): ClientCredentials {
  if (chunk['token'] !== undefined) {
    if (!isHex(chunk['token'])) throw new ApiError(401, 'Invalid token')
    return { token: chunk['token'] as string }
  }
  if (chunk['eauth'] !== undefined) {
    const { eauth, username, password } = chunk
    if (typeof eauth !== 'string' || typeof username !== 'string' || typeof password !== 'string')
      throw new ApiError(401, 'eauth credentials need "eauth", "username" and "password" strings')
    return { eauth, username, password }
  }
  throw new ApiError(401, 'No authentication credentials given')
}

/** A chunk's `arg` as a list (a scalar becomes a one-item list, as salt-api does for form bodies). */
function argList(chunk: Chunk): unknown[] {
  const arg = chunk['arg']
  if (arg === undefined || arg === null) return []
  return Array.isArray(arg) ? arg : [arg]
}

function kwargMap(chunk: Chunk): Record<string, unknown> {
  const kwarg = chunk['kwarg']
  if (kwarg === undefined || kwarg === null) return {}
  if (!isMap(kwarg)) throw new ApiError(400, "'kwarg' must be a mapping")
  return kwarg
}

/** Keyword arguments of a runner or wheel chunk: its own extra keys and its `kwarg` (Salt passes both). */
function extraKwargs(chunk: Chunk): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(chunk)) if (!RESERVED.has(key)) out[key] = value
  return { ...out, ...kwargMap(chunk) }
}

/** What a local chunk adds to its publish, as Salt's LocalClient takes them: `ret` (returners) and `metadata` (a mapping; 400 otherwise). */
function publishExtras(chunk: Chunk): { ret?: string; metadata?: Record<string, unknown> } {
  const out: { ret?: string; metadata?: Record<string, unknown> } = {}
  if (typeof chunk['ret'] === 'string') out.ret = chunk['ret']
  const metadata = chunk['metadata']
  if (metadata !== undefined && metadata !== null) {
    if (!isMap(metadata)) throw new ApiError(400, `'metadata' must be a mapping, got ${JSON.stringify(metadata)?.slice(0, 80)}`)
    out.metadata = metadata
  }
  return out
}

function requiredString(chunk: Chunk, key: string): string {
  const value = chunk[key]
  if (typeof value !== 'string' || value === '') throw new ApiError(400, `Missing or invalid '${key}' (a string) for client '${String(chunk['client'])}'`)
  return value
}

function target(chunk: Chunk): { tgt: Tgt; tgtType: TargetType } {
  const tgt = chunk['tgt']
  const valid = typeof tgt === 'string' ? tgt !== '' : Array.isArray(tgt) && tgt.every((item) => typeof item === 'string')
  if (!valid) throw new ApiError(400, `Missing or invalid 'tgt' for client '${String(chunk['client'])}'`)
  const type = chunk['tgt_type'] ?? chunk['expr_form'] ?? 'glob'
  if (typeof type !== 'string' || !(TARGET_TYPES as readonly string[]).includes(type))
    throw new ApiError(400, `'tgt_type' must be one of ${TARGET_TYPES.join(', ')}`)
  // Salt splits a list target given as a string.
  const list =
    type === 'list' && typeof tgt === 'string'
      ? tgt
          .split(',')
          .map((id) => id.trim())
          .filter((id) => id !== '')
      : (tgt as Tgt)
  return { tgt: list, tgtType: type as TargetType }
}

/** Seconds in a chunk's `timeout` → ms, or undefined. */
function timeoutMs(chunk: Chunk): number | undefined {
  const value = chunk['timeout']
  if (value === undefined || value === null || value === '') return undefined
  const seconds = Number(value)
  if (!Number.isFinite(seconds) || seconds < 0) throw new ApiError(400, `'timeout' must be a number of seconds, got ${JSON.stringify(value)}`)
  return msFromSeconds(seconds)
}

const truthy = (value: unknown): boolean => value === true || (typeof value === 'string' && ['true', 'yes', '1'].includes(value.toLowerCase()))

/**
 * Salt's NetapiClient.run for one chunk: checks the master is up (503), the client exists (400) and is
 * in `netapi_enable_clients` (400), that credentials are there (401), then calls the client and answers
 * salt-api's shape for it. The master checks the credentials and the ACL (both 401, as salt-api answers them).
 */
export async function runChunk(chunk: Chunk, link: ApiMasterClient, settings: ApiSettings, origin: RequestOrigin = { client: 'api' }): Promise<unknown> {
  if (!link.masterRunning) throw new ApiError(503, 'the master is not available (its event bus is not reachable)')
  const client = chunk['client']
  if (typeof client !== 'string' || !(API_CLIENTS as readonly string[]).includes(client))
    throw new ApiError(400, `Invalid client specified: '${String(client)}'`)
  if (!settings.enabledClients.includes(client))
    throw new ApiError(400, `Client disabled: '${client}'. Add to 'netapi_enable_clients' master config option to enable.`)
  // The caller's credentials, and where the call came from (the master's audit log records it).
  const who: Who = { credentials: chunkCredentials(chunk), origin }
  switch (client) {
    case 'local':
      return link.call(() => local(chunk, link, who), 'local')
    case 'local_async':
      return link.call(() => localAsync(chunk, link, who), 'local_async')
    case 'local_batch':
      return link.call(() => localBatch(chunk, link, who), 'local_batch')
    case 'local_subset':
      return link.call(() => localSubset(chunk, link, who), 'local_subset')
    case 'runner': {
      const fun = requiredString(chunk, 'fun')
      const result = await link.call(() => link.runner.cmdFull(fun, argList(chunk), extraKwargs(chunk), who), 'runner')
      return truthy(chunk['full_return']) ? { fun: `runner.${fun}`, jid: result.jid, return: result.return, success: result.success } : result.return
    }
    case 'runner_async': {
      const fun = requiredString(chunk, 'fun')
      return link.call(() => link.runner.cmdAsync(fun, argList(chunk), extraKwargs(chunk), who), 'runner_async')
    }
    case 'wheel': {
      const fun = requiredString(chunk, 'fun')
      const result = await link.call(() => link.wheel.cmdFull(fun, extraKwargs(chunk), who), 'wheel')
      return {
        tag: result.tag,
        data: {
          fun: `wheel.${fun}`,
          jid: result.jid,
          tag: result.tag,
          user: result.user,
          _stamp: new Date().toISOString(),
          return: result.return,
          success: result.success,
        },
      }
    }
    case 'wheel_async': {
      const fun = requiredString(chunk, 'fun')
      return link.call(() => link.wheel.cmdAsync(fun, extraKwargs(chunk), who), 'wheel_async')
    }
    default:
      throw new ApiError(400, `Invalid client specified: '${client}'`)
  }
}

/** Salt's LocalClient.cmd: `{id: return}` (`{id: {ret, retcode, jid}}` with full_return), False for a minion that did not return, {} when nothing matched. */
async function local(chunk: Chunk, link: ApiMasterClient, who: Who): Promise<Record<string, unknown>> {
  const { tgt, tgtType } = target(chunk)
  const fun = requiredString(chunk, 'fun')
  const timeout = timeoutMs(chunk)
  const full = truthy(chunk['full_return'])
  const options = {
    tgtType,
    kwarg: kwargMap(chunk),
    ...who,
    listen: true,
    ...(timeout === undefined ? {} : { timeout }),
    ...publishExtras(chunk),
  }
  await using job = await link.local.runJob(tgt, fun, argList(chunk), options)
  const out: Record<string, unknown> = {}
  if (job.minions.length === 0) return out
  for await (const item of job.returns(timeout === undefined ? {} : { timeout })) {
    // Salt's cmd: False for a minion that did not return, with or without full_return.
    if (item.status === 'missing') out[item.id] = false
    else out[item.id] = full ? { ret: item.ret, retcode: item.retcode, jid: item.jid, ...(item.out === undefined ? {} : { out: item.out }) } : item.ret
  }
  return out
}

/**
 * Salt's cmd_subset through salt-api: `sys.list_functions` on the target, then `fun` on `subset` (default 3)
 * of the minions that have it, picked at random, answered as `local` answers; {} when none has it.
 */
async function localSubset(chunk: Chunk, link: ApiMasterClient, who: Who): Promise<Record<string, unknown>> {
  const { tgt, tgtType } = target(chunk)
  const fun = requiredString(chunk, 'fun')
  let size: number
  try {
    size = parseSubsetSize(chunk['subset'] ?? DEFAULT_SUBSET_SIZE, "'subset'")
  } catch (error) {
    if (error instanceof SubsetSizeError) throw new ApiError(400, error.message)
    throw error
  }
  const timeout = timeoutMs(chunk)
  const ids = await link.local.subsetOf(tgt, fun, size, { tgtType, ...who, ...(timeout === undefined ? {} : { timeout }) })
  return ids.length === 0 ? {} : local({ ...chunk, tgt: ids, tgt_type: 'list' }, link, who)
}

/**
 * Salt's cmd_batch through salt-api: every return as `{id: return}` in the order they came, one list for
 * the chunk; `batch` (a count or a percentage, default 10%), `batch_wait` (seconds) and `failhard` as the CLI's.
 */
async function localBatch(chunk: Chunk, link: ApiMasterClient, who: Who): Promise<Array<Record<string, unknown>>> {
  const { tgt, tgtType } = target(chunk)
  const fun = requiredString(chunk, 'fun')
  const timeout = timeoutMs(chunk)
  const batchWait = chunk['batch_wait'] === undefined ? undefined : Number(chunk['batch_wait'])
  if (batchWait !== undefined && (!Number.isFinite(batchWait) || batchWait < 0))
    throw new ApiError(400, `'batch_wait' must be a number of seconds, got ${JSON.stringify(chunk['batch_wait'])}`)
  const batch = chunk['batch'] ?? '10%'
  if (typeof batch !== 'string' && typeof batch !== 'number') throw new ApiError(400, `'batch' must be a count or a percentage, got ${JSON.stringify(batch)}`)
  const options = {
    tgtType,
    kwarg: kwargMap(chunk),
    ...who,
    batch,
    failhard: truthy(chunk['failhard']),
    ...(timeout === undefined ? {} : { timeout }),
    ...(batchWait === undefined ? {} : { batchWait: msFromSeconds(batchWait) }),
    ...publishExtras(chunk),
  }
  const out: Array<Record<string, unknown>> = []
  for await (const event of link.local.cmdBatch(tgt, fun, argList(chunk), options)) {
    if (event.type !== 'return') continue
    // Salt's cmd_batch yields False for a minion that did not return.
    out.push({ [event.item.id]: event.item.status === 'missing' ? false : event.item.ret })
  }
  return out
}

/** Salt's run_job: `{jid, minions}`, or {} when no minion matched. */
async function localAsync(chunk: Chunk, link: ApiMasterClient, who: Who): Promise<Record<string, unknown>> {
  const { tgt, tgtType } = target(chunk)
  const fun = requiredString(chunk, 'fun')
  const timeout = timeoutMs(chunk)
  await using job = await link.local.runJob(tgt, fun, argList(chunk), {
    tgtType,
    kwarg: kwargMap(chunk),
    ...who,
    ...(timeout === undefined ? {} : { timeout }),
    ...publishExtras(chunk),
  })
  return job.minions.length === 0 ? {} : { jid: job.jid, minions: [...job.minions] }
}
