/**
 * The master's side of `saltutil.sync_modules`: the custom execution modules under `_modules/` of
 * each `file_roots` directory of an environment, listed with their hashes and sent to a minion over
 * the sealed channel (`_modules_sync`). Reads are confined to `_modules/` (plain `*.js`/`*.mjs` files
 * named like Python identifiers, no symlinks out) and bounded in count and size, so what a minion
 * asks for costs the master a known amount. The general salt:// file server supersedes the transfer
 * part of this once it lands; the listing rule (first root of the environment wins per name) is Salt's.
 */
import { createHash } from 'node:crypto'
import { lstat, readdir, readFile, realpath } from 'node:fs/promises'
import { join, sep } from 'node:path'
import { MalformedRequestError } from './errors.js'

/** One module as the master lists it; `data` only when the minion's copy differs. */
export interface SyncedModuleEntry {
  name: string
  hash: string
  size: number
  data?: Uint8Array
}

export interface ModuleSyncLimits {
  /** Largest module file sent, bytes (default 1 MiB). */
  maxFileBytes: number
  /** Most modules listed per environment (default 256). */
  maxFiles: number
  /** Most bytes of module text in one answer (default 16 MiB). */
  maxTotalBytes: number
}

export const DEFAULT_MODULE_SYNC_LIMITS: ModuleSyncLimits = { maxFileBytes: 1 << 20, maxFiles: 256, maxTotalBytes: 16 << 20 }

const MODULE_FILE = /^([A-Za-z_][A-Za-z0-9_]*)\.(m?js)$/
const SALTENV = /^[A-Za-z0-9_.-]{1,64}$/
const SHA256 = /^[0-9a-f]{64}$/

/** The directories of one environment in `file_roots` (Salt's `{env: [dirs]}`), validated. */
function rootsOf(fileRoots: Readonly<Record<string, unknown>>, saltenv: string): string[] {
  const roots = fileRoots[saltenv]
  if (roots === undefined) return []
  const list = Array.isArray(roots) ? roots : [roots]
  return list.filter((root): root is string => typeof root === 'string' && root !== '')
}

/** `have` from a minion: module name → sha256 of its copy; anything else is refused. */
function readHave(have: unknown): Map<string, string> {
  if (have === undefined || have === null) return new Map()
  if (typeof have !== 'object' || Array.isArray(have)) throw new MalformedRequestError('_modules_sync load', "field 'have' must be a mapping of module name to sha256")
  const entries = Object.entries(have as Record<string, unknown>)
  if (entries.length > 4096) throw new MalformedRequestError('_modules_sync load', `field 'have' lists ${entries.length} modules (at most 4096)`)
  const result = new Map<string, string>()
  for (const [name, hash] of entries) if (typeof hash === 'string' && SHA256.test(hash)) result.set(name, hash)
  return result
}

/** A regular file inside `dir` (symlinks followed only when they stay inside it), or undefined. */
async function confinedFile(dir: string, realDir: string, file: string): Promise<string | undefined> {
  const path = join(dir, file)
  const stat = await lstat(path).catch(() => undefined)
  if (stat === undefined) return undefined
  if (stat.isSymbolicLink()) {
    const target = await realpath(path).catch(() => undefined)
    if (target === undefined || !target.startsWith(realDir + sep)) return undefined
    return target
  }
  return stat.isFile() ? path : undefined
}

export class ModuleSyncSource {
  readonly #fileRoots: Readonly<Record<string, unknown>>
  readonly #limits: ModuleSyncLimits

  constructor(fileRoots: Readonly<Record<string, unknown>>, limits: Partial<ModuleSyncLimits> = {}) {
    this.#fileRoots = fileRoots
    this.#limits = { ...DEFAULT_MODULE_SYNC_LIMITS, ...limits }
  }

  /** Answers one `_modules_sync` load: `{modules: [...]}`, with text for each module the minion lacks. */
  async answer(load: Readonly<Record<string, unknown>>): Promise<{ modules: SyncedModuleEntry[]; skipped: string[] }> {
    const saltenv = load['saltenv'] ?? 'base'
    if (typeof saltenv !== 'string' || !SALTENV.test(saltenv)) throw new MalformedRequestError('_modules_sync load', `saltenv ${JSON.stringify(String(saltenv)).slice(0, 80)} is not an environment name`)
    const have = readHave(load['have'])
    const found = await this.#list(saltenv)
    const modules: SyncedModuleEntry[] = []
    const skipped: string[] = []
    let total = 0
    for (const [name, path] of [...found].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const data = await readFile(path)
      const hash = createHash('sha256').update(data).digest('hex')
      // A module left out is still listed (without text), so a minion keeps the copy it has instead of deleting it.
      const entry: SyncedModuleEntry = { name, hash, size: data.length }
      modules.push(entry)
      if (have.get(name) === hash) continue
      if (data.length > this.#limits.maxFileBytes) {
        skipped.push(`${name}: ${data.length} bytes, more than ${this.#limits.maxFileBytes}`)
        continue
      }
      if (total + data.length > this.#limits.maxTotalBytes) {
        skipped.push(`${name}: the answer would pass ${this.#limits.maxTotalBytes} bytes; sync again for the rest`)
        continue
      }
      total += data.length
      entry.data = new Uint8Array(data)
    }
    return { modules, skipped }
  }

  /** Module name → file, the first root of the environment holding a name winning, as Salt's fileserver does. */
  async #list(saltenv: string): Promise<Map<string, string>> {
    const found = new Map<string, string>()
    for (const root of rootsOf(this.#fileRoots, saltenv)) {
      const dir = join(root, '_modules')
      const realDir = await realpath(dir).catch(() => undefined)
      if (realDir === undefined) continue
      const files = (await readdir(dir).catch(() => [] as string[])).sort()
      for (const file of files) {
        const match = MODULE_FILE.exec(file)
        if (match === null || found.has(match[1] as string)) continue
        const path = await confinedFile(dir, realDir, file)
        if (path === undefined) continue
        if (found.size >= this.#limits.maxFiles) return found
        found.set(match[1] as string, path)
      }
    }
    return found
  }
}
