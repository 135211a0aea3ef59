/**
 * Salt's `pkg` virtual module with two providers chosen from the `os_family` grain, as Salt's
 * `__virtual__`s do: apt/dpkg for Debian (salt/modules/aptpkg.py) and dnf/rpm for RedHat
 * (salt/modules/yumpkg.py). Changes are reported as Salt does, `{name: {old, new}}` from the package
 * lists before and after. `sources=` entries are resolved to local files by a small pluggable resolver.
 */
import { stat } from 'node:fs/promises'
import { isAbsolute } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CommandExecutionError, InvocationError } from '../errors.js'
import { asCommandError } from '../file-client.js'
import { isPlainObject } from './args.js'
import type { CommandResult } from './cmd.js'
import { cacheFileFor } from './cp.js'
import { aptProvider } from './pkg-apt.js'
import { dnfProvider } from './pkg-dnf.js'
import type { InstallTarget, PackageList, PackageProvider } from './pkg-provider.js'
import type { JobContext, ModuleDefinition, ModuleFunctionSpec } from './types.js'
import { badArgument, execArgv, isSet, requireString, requireUnitName, toBool } from './validate.js'

export type { InstallTarget, PackageList, PackageProvider } from './pkg-provider.js'

/**
 * Turns one `sources=` value into a local file path: an absolute path or `file://` URL as it is;
 * `salt://` (with its `?saltenv=`) cached from the master's file server as `cp.cache_file` caches it.
 */
export type PackageSourceResolver = (ctx: JobContext, source: string) => Promise<string>

export const defaultSourceResolver: PackageSourceResolver = async (ctx, source) => {
  let path = source
  if (source.startsWith('salt://')) {
    let cached: string | false
    try {
      cached = await cacheFileFor(ctx, source, null)
    } catch (error) {
      // A refusal (a path out of the roots, no master) names the file server's error, as cp's functions do.
      throw asCommandError(error)
    }
    if (cached === false) throw new CommandExecutionError(`Unable to cache ${source} from the master: no such file in its file_roots`, { source })
    path = cached
  } else if (source.startsWith('file://')) {
    path = fileURLToPath(source)
  } else if (!isAbsolute(source)) {
    throw badArgument('sources', 'entries of local absolute paths, file:// or salt:// URLs', source)
  }
  if ((await stat(path).catch(() => undefined))?.isFile() !== true) throw new CommandExecutionError(`package source ${source} is not a file`, { source })
  return path
}

const VERSION = /^[A-Za-z0-9.+~:_-]{1,128}$/

/** Salt's `pkgs=` (names, or `{name: version}` items) → targets. */
function pkgsTargets(value: unknown): InstallTarget[] {
  if (!Array.isArray(value)) throw badArgument('pkgs', 'a list of names or {name: version} items', value)
  return value.flatMap((item) => {
    if (!isPlainObject(item)) return [{ name: requireUnitName(item, 'pkgs') }]
    return Object.entries(item).map(([name, version]) => {
      const target: InstallTarget = { name: requireUnitName(name, 'pkgs') }
      if (isSet(version) && version !== '') target.version = versionOf(version, 'pkgs')
      return target
    })
  })
}

function versionOf(value: unknown, name: string): string {
  const text = requireString(value, name)
  if (!VERSION.test(text)) throw badArgument(name, 'a package version (letters, digits and . + ~ : _ -)', value)
  return text
}

/** Salt's `sources=` (`[{name: source}]`) → targets with local files. */
async function sourceTargets(ctx: JobContext, value: unknown, resolve: PackageSourceResolver): Promise<InstallTarget[]> {
  const list = typeof value === 'string' ? (JSON.parse(value) as unknown) : value
  if (!Array.isArray(list) || list.length === 0) throw badArgument('sources', 'a non-empty list of {name: source} items', value)
  const targets: InstallTarget[] = []
  for (const item of list) {
    if (!isPlainObject(item) || Object.keys(item).length !== 1) throw badArgument('sources', 'a list of one-key {name: source} items', item)
    const [name, source] = Object.entries(item)[0] as [string, unknown]
    targets.push({ name: requireUnitName(name, 'sources'), file: await resolve(ctx, requireString(source, 'sources')) })
  }
  return targets
}

/** Salt's changes: every name whose version differs, `{old, new}` with '' for absent. */
export function packageChanges(before: PackageList, after: PackageList): Record<string, { old: string; new: string }> {
  const changes: Record<string, { old: string; new: string }> = {}
  for (const name of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (before[name] !== after[name]) changes[name] = { old: before[name] ?? '', new: after[name] ?? '' }
  }
  return changes
}

/** Runs a change and reports Salt's `{name: {old, new}}`; a failed command raises with the changes made and its output. */
async function withChanges(
  ctx: JobContext,
  provider: PackageProvider,
  what: string,
  change: () => Promise<CommandResult>,
): Promise<Record<string, { old: string; new: string }>> {
  const before = await provider.list(ctx)
  const result = await change()
  const changes = packageChanges(before, await provider.list(ctx))
  if (result.retcode !== 0) {
    const errors = (result.stderr || result.stdout).trim().split('\n').slice(-20).join('\n')
    throw new CommandExecutionError(`Problem encountered ${what} package(s): ${errors}`, { changes: JSON.stringify(changes).slice(0, 2000) })
  }
  return changes
}

async function chooseProvider(ctx: JobContext): Promise<PackageProvider> {
  const family = ctx.grains.os_family
  if (family === 'Debian') return aptProvider
  if (family === 'RedHat') return dnfProvider
  if ((await execArgv(ctx, ['dpkg-query', '--version'], { timeout: 10 }).catch(() => undefined))?.retcode === 0) return aptProvider
  throw new CommandExecutionError(`no pkg provider for os_family ${JSON.stringify(family)} (Brine has apt for Debian and dnf for RedHat)`)
}

function namesOf(args: readonly unknown[]): string[] {
  if (args.length === 0) throw new InvocationError('at least one package name is required', { argument: 'names' })
  return args.map((name) => requireUnitName(name, 'names'))
}

function removalTargets(name: unknown, pkgs: unknown): string[] {
  if (isSet(pkgs)) return pkgsTargets(pkgs).map((target) => target.name)
  if (!isSet(name)) throw new InvocationError('name or pkgs is required', { argument: 'name' })
  return String(name)
    .split(',')
    .map((item) => requireUnitName(item.trim(), 'name'))
}

const asList = (list: PackageList, versionsAsList: boolean): Record<string, string | string[]> =>
  versionsAsList ? Object.fromEntries(Object.entries(list).map(([name, version]) => [name, [version]])) : list

/** pkg.install: `name`, `pkgs` or `sources` (resolved to local files by `resolveSource`). */
function installSpec(resolveSource: PackageSourceResolver): ModuleFunctionSpec {
  return {
    doc: 'Install the named package, the packages in ``pkgs`` (names or {name: version}), or the package files in ``sources`` ([{name: source}]: absolute paths, file:// or salt:// URLs). Returns a dict of what changed: {name: {old, new}}.\n\nCLI Example:\n\n    brine \'*\' pkg.install curl\n    brine \'*\' pkg.install pkgs=\'["foo", {"bar": "1.2.3-4"}]\'\n    brine \'*\' pkg.install sources=\'[{"brine-test": "/tmp/brine-test_1.0_all.deb"}]\'',
    args: ['name', 'refresh', 'fromrepo', 'skip_verify', 'debconf', 'pkgs', 'sources', 'reinstall', 'downloadonly', 'version'],
    defaults: {
      name: null,
      refresh: false,
      fromrepo: null,
      skip_verify: false,
      debconf: null,
      pkgs: null,
      sources: null,
      reinstall: false,
      downloadonly: false,
      version: null,
    },
    kwargs: true,
    run: async ([name, refresh, fromrepo, skipVerify, debconf, pkgs, sources, reinstall, downloadonly, version], _kwargs, ctx) => {
      // Accepted by name as Salt's, but not built: a value that asks for them is refused, not ignored.
      const unsupported = { fromrepo, skip_verify: skipVerify, debconf, downloadonly }
      for (const [option, value] of Object.entries(unsupported)) {
        if (isSet(value) && value !== false) throw new InvocationError(`pkg.install option '${option}' is not supported by Brine`, { argument: option })
      }
      let targets: InstallTarget[]
      if (isSet(sources)) targets = await sourceTargets(ctx, sources, resolveSource)
      else if (isSet(pkgs)) targets = pkgsTargets(pkgs)
      else if (isSet(name)) targets = [{ name: requireUnitName(name, 'name'), ...(isSet(version) ? { version: versionOf(version, 'version') } : {}) }]
      else throw new InvocationError('name, pkgs or sources is required', { argument: 'name' })
      const provider = await chooseProvider(ctx)
      const options = { refresh: toBool(refresh, 'refresh'), reinstall: toBool(reinstall, 'reinstall') }
      return await withChanges(ctx, provider, 'installing', () => provider.install(ctx, targets, options))
    },
  }
}

/** Builds the pkg module; the resolver is the seam for where `sources=` files come from. */
export function createPkgModule(resolveSource: PackageSourceResolver = defaultSourceResolver): ModuleDefinition {
  return {
    list_pkgs: {
      doc: "List the packages installed, as a dict of name → version (``versions_as_list=True``: → [version]).\n\nCLI Example:\n\n    brine '*' pkg.list_pkgs",
      args: ['versions_as_list', 'removed', 'purge_desired'],
      defaults: { versions_as_list: false, removed: false, purge_desired: false },
      kwargs: true,
      run: async ([versionsAsList], _kwargs, ctx) => asList(await (await chooseProvider(ctx)).list(ctx), toBool(versionsAsList, 'versions_as_list')),
    },
    version: {
      doc: "Return the installed version of the named package ('' when it is not installed); with several names, a dict of name → version.\n\nCLI Example:\n\n    brine '*' pkg.version <package name>\n    brine '*' pkg.version <package1> <package2>",
      varargs: true,
      kwargs: true,
      run: async (args, _kwargs, ctx) => {
        const names = namesOf(args)
        const installed = await (await chooseProvider(ctx)).list(ctx)
        if (names.length === 1) return installed[names[0] as string] ?? ''
        return Object.fromEntries(names.map((name) => [name, installed[name] ?? '']))
      },
    },
    latest_version: {
      doc: "Return the latest version available to install or upgrade the named package to ('' when the installed one is the latest); with several names, a dict. ``refresh`` (default True) refreshes the package database first.\n\nCLI Example:\n\n    brine '*' pkg.latest_version <package name> refresh=False",
      varargs: true,
      kwargs: true,
      run: async (args, kwargs, ctx) => {
        const names = namesOf(args)
        const latest = await (await chooseProvider(ctx)).latest(ctx, names, toBool(kwargs.refresh ?? true, 'refresh'))
        return names.length === 1 ? (latest[names[0] as string] ?? '') : latest
      },
    },
    install: installSpec(resolveSource),
    remove: {
      doc: "Remove the named package(s), keeping their configuration files. Returns {name: {old, new}} of what changed.\n\nCLI Example:\n\n    brine '*' pkg.remove <package name>\n    brine '*' pkg.remove pkgs='[\"foo\", \"bar\"]'",
      args: ['name', 'pkgs'],
      defaults: { name: null, pkgs: null },
      kwargs: true,
      run: async ([name, pkgs], _kwargs, ctx) => {
        const names = removalTargets(name, pkgs)
        const provider = await chooseProvider(ctx)
        return await withChanges(ctx, provider, 'removing', () => provider.remove(ctx, names, false))
      },
    },
    purge: {
      doc: "Remove the named package(s) and their configuration files. Returns {name: {old, new}} of what changed.\n\nCLI Example:\n\n    brine '*' pkg.purge <package name>",
      args: ['name', 'pkgs'],
      defaults: { name: null, pkgs: null },
      kwargs: true,
      run: async ([name, pkgs], _kwargs, ctx) => {
        const names = removalTargets(name, pkgs)
        const provider = await chooseProvider(ctx)
        return await withChanges(ctx, provider, 'purging', () => provider.remove(ctx, names, true))
      },
    },
    refresh_db: {
      doc: "Refresh the package database. Returns a dict of each repository → True (updated), None (unchanged) or False (failed).\n\nCLI Example:\n\n    brine '*' pkg.refresh_db",
      kwargs: true,
      run: async (_args, _kwargs, ctx) => await (await chooseProvider(ctx)).refresh(ctx),
    },
    list_upgrades: {
      doc: "List the packages with an upgrade available: name → version. ``refresh`` (default True) refreshes first.\n\nCLI Example:\n\n    brine '*' pkg.list_upgrades",
      args: ['refresh'],
      defaults: { refresh: true },
      kwargs: true,
      run: async ([refresh], _kwargs, ctx) => await (await chooseProvider(ctx)).listUpgrades(ctx, toBool(refresh, 'refresh')),
    },
    upgrade: {
      doc: "Upgrade every package that has an upgrade available. Returns {name: {old, new}} of what changed.\n\nCLI Example:\n\n    brine '*' pkg.upgrade",
      args: ['refresh'],
      defaults: { refresh: true },
      kwargs: true,
      run: async ([refresh], _kwargs, ctx) => {
        const provider = await chooseProvider(ctx)
        return await withChanges(ctx, provider, 'upgrading', () => provider.upgrade(ctx, toBool(refresh, 'refresh')))
      },
    },
  }
}

export const pkgModule: ModuleDefinition = createPkgModule()
