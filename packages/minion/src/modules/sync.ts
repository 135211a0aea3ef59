/**
 * `saltutil.sync_modules` on the minion, over the master's file server (so only the authenticated master
 * supplies modules): lists `salt://_modules/` of the environment, brings each module through the file
 * client hash first (a copy that already has the master's hash is not transferred), writes it under
 * `<extension_modules>/modules`, removes the ones the master no longer lists, and reloads the custom layer.
 */
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { CommandExecutionError } from '../errors.js'
import { asCommandError } from '../file-client.js'
import { fileClientFor } from './cp.js'
import { extensionModulesDir, MODULE_FILE, reloadCustomModules, type LoadReport } from './loader.js'
import type { JobContext } from './types.js'

/** Where custom modules live on the master, as in Salt: `salt://_modules/`. */
const MODULES_PREFIX = '_modules/'

/** The synced files held now: module name → file name. */
async function heldModules(dir: string): Promise<Map<string, string>> {
  const held = new Map<string, string>()
  for (const file of await readdir(dir).catch(() => [] as string[])) {
    const match = MODULE_FILE.exec(file)
    if (match !== null) held.set(match[1] as string, file)
  }
  return held
}

/**
 * The master's `_modules/` listing as modules: a file directly under it named as a module (`hello.js`,
 * `hello.mjs`) is one, the first listed holding a name wins (`.js` sorts before `.mjs`); anything else
 * (a README, a subdirectory's file, a name that is not an identifier) is skipped and named.
 */
function modulesOf(listed: readonly string[]): { modules: Map<string, string>; skipped: string[] } {
  const modules = new Map<string, string>()
  const skipped: string[] = []
  for (const path of listed) {
    const file = path.slice(MODULES_PREFIX.length)
    const match = path.startsWith(MODULES_PREFIX) ? MODULE_FILE.exec(file) : null
    const name = match?.[1]
    if (name === undefined) skipped.push(`salt://${path}: not a module file (a .js or .mjs file named as an identifier, directly under _modules/)`)
    else if (modules.has(name)) skipped.push(`salt://${path}: module ${name} is already synced from salt://${modules.get(name) ?? ''}`)
    else modules.set(name, path)
  }
  return { modules, skipped }
}

export interface SyncReport extends LoadReport {
  /** Salt's `modules.<name>` for each module written or removed. */
  changed: string[]
  /** Files under `_modules/` that are not modules, with why. */
  skipped: string[]
}

/** Syncs `_modules/` from the master's file server for `saltenv` and reloads the custom modules. */
export async function syncModules(ctx: JobContext, saltenv: string): Promise<SyncReport> {
  if (ctx.master === undefined) throw new CommandExecutionError('no master to sync modules from (a standalone minion loads module_dirs only)')
  const client = fileClientFor(ctx)
  const dir = join(extensionModulesDir(ctx.opts), 'modules')
  await mkdir(dir, { recursive: true, mode: 0o700 })
  // The directory's own package.json makes Node read a synced `.js` as an ES module wherever the cachedir is.
  await writeFile(join(dir, 'package.json'), '{"type": "module"}\n')
  const held = await heldModules(dir)
  let listed: string[]
  try {
    listed = await client.list('files', saltenv, MODULES_PREFIX)
  } catch (error) {
    // An unknown environment or a refusal is the job's error, named; nothing held is removed.
    throw asCommandError(error)
  }
  const { modules, skipped } = modulesOf(listed)
  const changed: string[] = []
  for (const [name, path] of modules) {
    // Every module is kept as `<name>.js` (the package.json above makes it ES), so a rename on the master
    // from .mjs to .js is no change here.
    const target = join(dir, `${name}.js`)
    let fetched
    try {
      fetched = await client.fetch(path, saltenv, target)
    } catch (error) {
      throw asCommandError(error)
    }
    // Listed but gone before its hash was asked (removed on the master meanwhile): the next sync settles it.
    if (fetched === undefined) continue
    const previous = held.get(name)
    if (previous !== undefined && previous !== `${name}.js`) await rm(join(dir, previous), { force: true })
    if (fetched.transferred > 0 || previous === undefined) changed.push(`modules.${name}`)
  }
  for (const [name, file] of held) {
    if (modules.has(name)) continue
    await rm(join(dir, file), { force: true })
    changed.push(`modules.${name}`)
  }
  const report = await reloadCustomModules(ctx.registry, ctx.opts, ctx.logger)
  return { ...report, changed: changed.sort(), skipped }
}
