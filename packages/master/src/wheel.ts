import { readdir } from 'node:fs/promises'
import {
  fingerprint,
  formatPublicKeys,
  matchIds,
  formatSecretKeys,
  generateKeys,
  publicKeysOf,
  validateMinionId,
  KEY_STATE_DIRS,
  type KeyChange,
  type KeyOperationResult,
  type KeyState,
  type PkiStore,
  type PublicKeys,
} from '@brine/crypt'
import { MalformedRequestError, UnknownWheelFunctionError } from '@brine/protocol'
import type { FileServer } from './file-server/file-server.js'

/** The master's public key file, as Salt's `local` entries name it. */
const MASTER_PUB_FILE = 'master.pub'

/** What a wheel call returned (Salt's shape, sent as `{return}`) and what it changed. */
export interface WheelOutcome {
  return: unknown
  changes: KeyChange[]
  rotateSession: boolean
}

export interface WheelContext {
  store: PkiStore
  masterPub: PublicKeys
  /** The file server, for file_roots.list_roots. */
  files?: FileServer
  /** The minions connected to this master, sorted (minions.connected). */
  connected?: () => string[]
  /** The master's pki_dir: key.list_all lists its key files as `local`. */
  pkiDir?: string
  /** The master's resolved config (config.values). */
  configValues?: Readonly<Record<string, unknown>>
}

/**
 * Salt's `local` entry: the key files in the master's pki_dir, sorted. Salt lists `.pem` and `.pub`;
 * Brine's secret file is `.key` (its `.pem`), so `.key` is listed too.
 */
async function localKeys(pkiDir: string | undefined): Promise<string[]> {
  if (pkiDir === undefined) return []
  const files: string[] = []
  for (const entry of await readdir(pkiDir, { withFileTypes: true }).catch(() => [])) {
    if (entry.isFile() && /\.(?:pub|pem|key)$/.test(entry.name)) files.push(entry.name)
  }
  return files.sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase()))
}

/** Salt's key.list: the state `match` names by its prefix (acc, pre/un, rej, den; all adds `local`); `{}` for anything else. */
async function listStatus(load: Record<string, unknown>, context: WheelContext): Promise<Record<string, string[]>> {
  const match = load['match']
  if (typeof match !== 'string')
    throw new MalformedRequestError('wheel key.list load', "field 'match' must be a key state: accepted, unaccepted, rejected, denied or all")
  const listing = await context.store.list()
  if (match.startsWith('acc')) return { minions: listing.minions }
  if (match.startsWith('pre') || match.startsWith('un')) return { minions_pre: listing.minions_pre }
  if (match.startsWith('rej')) return { minions_rejected: listing.minions_rejected }
  if (match.startsWith('den')) return { minions_denied: listing.minions_denied }
  if (match.startsWith('all')) return { ...listing, local: await localKeys(context.pkiDir) }
  return {}
}

/** A fresh key pair as Salt's key.gen answers it, `{priv, pub}`; nothing is stored. */
function freshKeys(): { pub: string; priv: string } {
  const keys = generateKeys()
  return { priv: formatSecretKeys(keys), pub: formatPublicKeys(publicKeysOf(keys)) }
}

type WheelFunction = (load: Record<string, unknown>, context: WheelContext) => Promise<WheelOutcome>

function match(load: Record<string, unknown>, fun: string): string | string[] {
  const value = load['match']
  if (typeof value === 'string' && value !== '') return value
  if (Array.isArray(value) && value.length > 0 && value.every((item) => typeof item === 'string' && item !== '')) return value as string[]
  throw new MalformedRequestError(`wheel ${fun} load`, "field 'match' must be a glob or a list of minion ids")
}

const flag = (load: Record<string, unknown>, key: string): boolean => load[key] === true

/** Salt's shape for key moves: ids grouped under the state directory they are now (or were) in. */
function byState(changes: readonly KeyChange[], side: 'from' | 'to'): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  for (const change of changes) {
    const state: KeyState | undefined = change[side]
    if (state === undefined) continue
    ;(out[KEY_STATE_DIRS[state]] ??= []).push(change.id)
  }
  for (const ids of Object.values(out)) ids.sort()
  return out
}

const moved = (result: KeyOperationResult, side: 'from' | 'to'): WheelOutcome => ({ return: byState(result.changes, side), ...result })
const unchanged = (value: unknown): WheelOutcome => ({ return: value, changes: [], rotateSession: false })

/** The `key.*` wheel functions `brine-key` uses, returning what Salt's `salt.wheel.key` returns. */
export const WHEEL_FUNCTIONS: Record<string, WheelFunction> = {
  // Salt's four states and `local` (the master's own key), and `syndics` (the accepted keys marked as syndics')
  // once there is one.
  'key.list_all': async (_load, context) => {
    const listing = await listStatus({ match: 'all' }, context)
    const syndics = await context.store.syndics()
    return unchanged(syndics.length === 0 ? listing : { ...listing, syndics })
  },
  // brine-key --accept-syndic: accepts matching pending keys, and marks them and matching accepted ones as syndics'.
  'key.accept_syndic': async (load, { store }) => {
    const result = await store.acceptSyndic(match(load, 'key.accept_syndic'))
    return { return: { syndics: result.syndics }, changes: result.changes, rotateSession: result.rotateSession }
  },
  'key.list': async (load, context) => unchanged(await listStatus(load, context)),
  // Salt's key.gen: a key pair returned, not stored (id_ and keysize are accepted; Brine's keys have one size).
  'key.gen': async () => unchanged(freshKeys()),
  'minions.connected': async (_load, { connected }) => unchanged(connected?.() ?? []),
  'config.values': async (_load, { configValues }) => unchanged(configValues ?? {}),
  'key.accept': async (load, { store }) =>
    moved(
      await store.accept(match(load, 'key.accept'), { includeRejected: flag(load, 'include_rejected'), includeDenied: flag(load, 'include_denied') }),
      'to',
    ),
  'key.accept_all': async (load, { store }) =>
    moved(await store.acceptAll({ includeRejected: flag(load, 'include_rejected'), includeDenied: flag(load, 'include_denied') }), 'to'),
  'key.reject': async (load, { store }) =>
    moved(
      await store.reject(match(load, 'key.reject'), { includeAccepted: flag(load, 'include_accepted'), includeDenied: flag(load, 'include_denied') }),
      'to',
    ),
  'key.reject_all': async (load, { store }) =>
    moved(await store.rejectAll({ includeAccepted: flag(load, 'include_accepted'), includeDenied: flag(load, 'include_denied') }), 'to'),
  'key.delete': async (load, { store }) => moved(await store.delete(match(load, 'key.delete')), 'from'),
  'key.delete_all': async (_load, { store }) => moved(await store.deleteAll(), 'from'),
  'key.finger': async (load, { store, masterPub }) => {
    const out: Record<string, Record<string, string>> = {}
    const patterns = match(load, 'key.finger')
    for (const { id, state, fingerprint: finger } of await store.finger(patterns)) {
      ;(out[KEY_STATE_DIRS[state]] ??= {})[id] = finger
    }
    // Salt's finger matches the master's own key files too, listed under `local` (the public one only here).
    if (matchIds([MASTER_PUB_FILE], patterns).length > 0) out['local'] = { [MASTER_PUB_FILE]: fingerprint(masterPub) }
    return unchanged(out)
  },
  'key.gen_accept': async (load, { store }) => {
    const id = load['id_'] ?? load['id']
    if (typeof id !== 'string') throw new MalformedRequestError('wheel key.gen_accept load', "field 'id_' must be the minion id")
    validateMinionId(id)
    // Salt returns {} rather than replace an accepted key, unless force=True.
    if (!flag(load, 'force') && (await store.state(id)) === 'accepted') return unchanged({})
    const keys = generateKeys()
    // openMode writes the key straight into minions/ (replacing any on file), which is what gen_accept means.
    const result = await store.submit(id, publicKeysOf(keys), { openMode: true })
    return { return: { pub: formatPublicKeys(publicKeysOf(keys)), priv: formatSecretKeys(keys) }, changes: result.changes, rotateSession: result.rotateSession }
  },
  // salt-key -p/-P (Salt's key.print): each matching key's public key text, under its state.
  'key.print': async (load, { store }) => {
    const out: Record<string, Record<string, string>> = {}
    for (const { id, state } of await store.finger(match(load, 'key.print'))) {
      const record = await store.get(id)
      if (record === undefined) continue
      const keys = record.state === state ? record.keys : state === 'denied' ? record.denied : undefined
      if (keys !== undefined) (out[KEY_STATE_DIRS[state]] ??= {})[id] = formatPublicKeys(keys)
    }
    return unchanged(out)
  },
  'key.finger_master': async (_load, { masterPub }) => unchanged({ local: { [MASTER_PUB_FILE]: fingerprint(masterPub) } }),
  // Salt's file_roots.list_roots: per environment, one {root: {path: 'f'}} entry per root, its files as a tree.
  'file_roots.list_roots': async (_load, { files }) => {
    if (files === undefined) throw new MalformedRequestError('wheel file_roots.list_roots', 'this master has no file server')
    const out: Record<string, Record<string, unknown>[]> = {}
    for (const [env, roots] of Object.entries(files.roots.roots())) {
      out[env] = await Promise.all(roots.map(async (root) => ({ [root]: treeOf(await files.roots.list(env, 'files', '', root)) })))
    }
    return unchanged(out)
  },
}

/** `a/b/c` paths as Salt's nested tree: directories are mappings, files are 'f'. */
function treeOf(paths: readonly string[]): Record<string, unknown> {
  const tree: Record<string, unknown> = {}
  for (const path of paths) {
    const parts = path.split('/')
    let node = tree
    for (const part of parts.slice(0, -1)) node = (node[part] ??= {}) as Record<string, unknown>
    node[parts[parts.length - 1] as string] = 'f'
  }
  return tree
}

export async function runWheel(load: Record<string, unknown>, context: WheelContext): Promise<WheelOutcome> {
  const fun = load['fun']
  if (typeof fun !== 'string') throw new MalformedRequestError('wheel load', "field 'fun' must be a string")
  const run = Object.hasOwn(WHEEL_FUNCTIONS, fun) ? WHEEL_FUNCTIONS[fun] : undefined
  if (run === undefined) throw new UnknownWheelFunctionError(fun, Object.keys(WHEEL_FUNCTIONS))
  return run(load, context)
}
