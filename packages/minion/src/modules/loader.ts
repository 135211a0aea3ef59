/**
 * Salt's loader for custom execution modules: ES modules found in the synced `extension_modules`
 * directory and in local `module_dirs`, imported while the minion runs and laid over the built-in
 * functions. A module that fails to import or exports nothing usable is recorded by name with its
 * error; the others load regardless.
 */
import { createHash } from 'node:crypto'
import { readdir, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Logger } from '@brine/core'
import { cleanKwargs, isPlainObject } from './args.js'
import type { JobContext, MinionOpts, ModuleDefinition, ModuleFunctionSpec, ModuleRegistry } from './types.js'

/** A module file: a Python-identifier name (the module's), `.js` or `.mjs`. */
export const MODULE_FILE = /^([A-Za-z_][A-Za-z0-9_]*)\.(m?js)$/

/** A function as an author may export it: a full spec, or a plain function called with the positional arguments. */
export type CustomFunction = ModuleFunctionSpec | ((...args: never[]) => unknown)

/** What `defineModule` takes: the module's functions, and optionally its name (Salt's `__virtualname__`) and doc. */
export interface CustomModule {
  /** Name the functions are called under (default: the file's name). */
  readonly name?: string
  readonly doc?: string
  readonly functions: Readonly<Record<string, CustomFunction>>
}

/**
 * The typed helper for module authors: returns its argument unchanged, so a module written in
 * TypeScript is checked against the spec shape (`export default defineModule({ … })`). A module in
 * plain JavaScript can export the same object literal without it.
 */
export function defineModule<const T extends CustomModule>(module: T): T {
  return module
}

/** Where synced modules are kept: `extension_modules`, or `<cachedir>/extmods` as Salt derives it. */
export function extensionModulesDir(opts: MinionOpts): string {
  if (typeof opts.extension_modules === 'string' && opts.extension_modules !== '') return opts.extension_modules
  return join(typeof opts.cachedir === 'string' ? opts.cachedir : '/var/cache/brine/minion', 'extmods')
}

/**
 * The directories searched for custom modules, first holding a name wins: each `module_dirs` entry's
 * `_modules/` and `modules/` (Salt's rule), then `<extension_modules>/modules`, where syncs land.
 */
export function customModuleDirs(opts: MinionOpts): string[] {
  const local = Array.isArray(opts.module_dirs) ? opts.module_dirs.filter((dir): dir is string => typeof dir === 'string') : []
  return [...local.flatMap((dir) => [join(dir, '_modules'), join(dir, 'modules')]), join(extensionModulesDir(opts), 'modules')]
}

function specOf(module: string, name: string, value: unknown): ModuleFunctionSpec {
  if (typeof value === 'function') {
    const fn = value as (...args: unknown[]) => unknown
    const doc: unknown = (fn as { doc?: unknown }).doc

    return {
      doc: typeof doc === 'string' ? doc : '',
      varargs: true,
      kwargs: true,
      // Keyword arguments, when any were given, arrive as one last object argument.
      run: async (args, kwargs) => {
        const named = cleanKwargs(kwargs)
        return await fn(...args, ...(Object.keys(named).length > 0 ? [named] : []))
      },
    }
  }
  if (!isPlainObject(value) || typeof value.run !== 'function') {
    throw new TypeError(`${module}.${name} is neither a function nor a {doc, run} spec`)
  }
  const args = value.args ?? []
  if (!Array.isArray(args) || !args.every((arg) => typeof arg === 'string')) throw new TypeError(`${module}.${name}: args must be a list of names`)
  const run = value.run as ModuleFunctionSpec['run']
  return {
    ...(value as unknown as ModuleFunctionSpec),
    doc: typeof value.doc === 'string' ? value.doc : '',
    args: args as string[],
    run: async (callArgs: unknown[], kwargs: Record<string, unknown>, ctx: JobContext) => await run(callArgs, kwargs, ctx),
  }
}

/** Turns an imported module's exports into a definition (and the name it is registered under). */
export function definitionOf(file: string, exports: Record<string, unknown>): { name: string; definition: ModuleDefinition } {
  const fallback = typeof exports.__virtualname__ === 'string' ? exports.__virtualname__ : file
  const main = exports.default
  const entries: [string, unknown][] = []
  let name = fallback
  if (isPlainObject(main) && isPlainObject(main.functions)) {
    if (typeof main.name === 'string') name = main.name
    entries.push(...Object.entries(main.functions))
  } else {
    for (const [key, value] of Object.entries(exports)) {
      if (key === 'default' || key.startsWith('_')) continue
      if (typeof value === 'function' || (isPlainObject(value) && typeof value.run === 'function')) entries.push([key, value])
    }
  }
  if (entries.length === 0) throw new TypeError('the module exports no functions (export functions, or a default defineModule({ functions }))')
  const definition: Record<string, ModuleFunctionSpec> = {}
  for (const [key, value] of entries) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new TypeError(`function name ${JSON.stringify(key)} is not an identifier`)
    definition[key] = specOf(name, key, value)
  }
  return { name, definition }
}

/** The module files of the search path, by module (file) name; the first directory holding a name wins. */
export async function findModuleFiles(dirs: readonly string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>()
  for (const dir of dirs) {
    const files = await readdir(dir).catch(() => [] as string[])
    for (const file of files.sort()) {
      const match = MODULE_FILE.exec(file)
      if (match === null || found.has(match[1] as string)) continue
      const path = join(dir, file)
      if ((await stat(path).catch(() => undefined))?.isFile() === true) found.set(match[1] as string, path)
    }
  }
  return found
}

/**
 * Imports one module file. The URL carries the file's hash: Node caches an ES module per URL, so
 * a changed file is imported afresh and an unchanged one is not imported twice.
 */
async function importModule(path: string): Promise<Record<string, unknown>> {
  const hash = createHash('sha256')
    .update(await readFile(path))
    .digest('hex')
    .slice(0, 16)
  return (await import(`${pathToFileURL(path).href}?sha256=${hash}`)) as Record<string, unknown>
}

export interface LoadReport {
  /** Module names loaded. */
  loaded: string[]
  /** Module name → why it did not load. */
  failed: Record<string, string>
}

/** (Re)loads every custom module into `registry`, replacing the previous custom layer. */
export async function reloadCustomModules(registry: ModuleRegistry, opts: MinionOpts, logger: Logger): Promise<LoadReport> {
  const modules: Record<string, ModuleDefinition> = {}
  const failed: Record<string, string> = {}
  for (const [file, path] of await findModuleFiles(customModuleDirs(opts))) {
    try {
      const { name, definition } = definitionOf(file, await importModule(path))
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new TypeError(`module name ${JSON.stringify(name)} is not an identifier`)
      modules[name] = { ...modules[name], ...definition }
    } catch (error) {
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
      failed[file] = message
      logger.warning(`custom module ${file} (${path}) failed to load: ${message}`)
    }
  }
  registry.setCustom(modules, failed)
  return { loaded: Object.keys(modules).sort(), failed }
}
