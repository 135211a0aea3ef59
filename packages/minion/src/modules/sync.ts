/**
 * `saltutil.sync_modules` on the minion: asks the master (sealed `_modules_sync`, so only the
 * authenticated master supplies modules) for `_modules/` of its file_roots, sending the hashes of
 * the copies it holds so only changed files travel; writes them under `<extension_modules>/modules`,
 * removes the ones the master no longer has, and reloads the custom layer.
 */
import { createHash } from 'node:crypto'
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { CommandExecutionError } from '../errors.js'
import { isPlainObject } from './args.js'
import { extensionModulesDir, MODULE_FILE, reloadCustomModules, type LoadReport } from './loader.js'
import type { JobContext } from './types.js'

const sha256 = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex')

/** The synced files held now: module name → [file name, sha256]. */
async function heldModules(dir: string): Promise<Map<string, [string, string]>> {
  const held = new Map<string, [string, string]>()
  for (const file of await readdir(dir).catch(() => [] as string[])) {
    const match = MODULE_FILE.exec(file)
    if (match === null) continue
    const data = await readFile(join(dir, file)).catch(() => undefined)
    if (data !== undefined) held.set(match[1] as string, [file, sha256(data)])
  }
  return held
}

interface Listed {
  name: string
  hash: string
  data?: Uint8Array
}

/** The master's listing, checked: names are identifiers, hashes match the text sent. */
function readListing(reply: Record<string, unknown>): { listed: Listed[]; skipped: string[] } {
  const modules = reply.modules
  if (!Array.isArray(modules)) throw new CommandExecutionError("the master's _modules_sync answer has no module list (is it older than this minion?)")
  const listed: Listed[] = []
  for (const entry of modules) {
    if (!isPlainObject(entry) || typeof entry.name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(entry.name) || typeof entry.hash !== 'string') {
      throw new CommandExecutionError(`the master listed a module entry that is not {name, hash}: ${JSON.stringify(entry).slice(0, 120)}`)
    }
    const item: Listed = { name: entry.name, hash: entry.hash }
    if (entry.data instanceof Uint8Array) {
      if (sha256(entry.data) !== entry.hash) throw new CommandExecutionError(`module ${entry.name} arrived with a hash that does not match its text`)
      item.data = entry.data
    }
    listed.push(item)
  }
  const skipped = Array.isArray(reply.skipped) ? reply.skipped.map(String) : []
  return { listed, skipped }
}

export interface SyncReport extends LoadReport {
  /** Salt's `modules.<name>` for each module written or removed. */
  changed: string[]
  /** Modules the master did not send (too large), with why. */
  skipped: string[]
}

/** Syncs `_modules/` from the master for `saltenv` and reloads the custom modules. */
export async function syncModules(ctx: JobContext, saltenv: string): Promise<SyncReport> {
  const master = ctx.master
  if (master === undefined) throw new CommandExecutionError('no master to sync modules from (a standalone minion loads module_dirs only)')
  const dir = join(extensionModulesDir(ctx.opts), 'modules')
  await mkdir(dir, { recursive: true, mode: 0o700 })
  // The directory's own package.json makes Node read a synced `.js` as an ES module wherever the cachedir is.
  await writeFile(join(dir, 'package.json'), '{"type": "module"}\n')
  const held = await heldModules(dir)
  const have = Object.fromEntries([...held].map(([name, [, hash]]) => [name, hash]))
  const reply = await master.request({ cmd: '_modules_sync', id: ctx.id, saltenv, have }, { signal: ctx.signal })
  const { listed, skipped } = readListing(reply)
  const changed: string[] = []
  for (const item of listed) {
    if (item.data === undefined) continue
    const previous = held.get(item.name)
    const target = join(dir, `${item.name}.js`)
    const temporary = `${target}.${process.pid}.tmp`
    await writeFile(temporary, item.data, { mode: 0o600 })
    await rename(temporary, target)
    if (previous !== undefined && previous[0] !== `${item.name}.js`) await rm(join(dir, previous[0]), { force: true })
    changed.push(`modules.${item.name}`)
  }
  const names = new Set(listed.map((item) => item.name))
  for (const [name, [file]] of held) {
    if (names.has(name)) continue
    await rm(join(dir, file), { force: true })
    changed.push(`modules.${name}`)
  }
  const report = await reloadCustomModules(ctx.registry, ctx.opts, ctx.logger)
  return { ...report, changed: changed.sort(), skipped }
}
