/**
 * Salt's `service` module with two providers chosen as Salt's `__virtual__`s choose them: systemd
 * (salt/modules/systemd_service.py) when systemd is the running init (`/run/systemd/system` exists),
 * else Debian's `service` and `/etc/init.d` scripts (salt/modules/debian_service.py). Every name is
 * checked before it reaches a command line, and commands run with argument arrays, never a shell.
 */
import { access, readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { CommandExecutionError } from '../errors.js'
import { fnmatch } from './args.js'
import type { JobContext, ModuleDefinition, ModuleFunctionSpec } from './types.js'
import { execArgv, requireUnitName, toBool } from './validate.js'

/** What one init system does for the module's functions. */
export interface ServiceProvider {
  readonly name: 'systemd' | 'debian_service'
  action(ctx: JobContext, name: string, action: 'start' | 'stop' | 'restart' | 'reload', noBlock: boolean): Promise<boolean>
  status(ctx: JobContext, name: string): Promise<boolean>
  enable(ctx: JobContext, name: string, enable: boolean): Promise<boolean>
  enabled(ctx: JobContext, name: string): Promise<boolean>
  getAll(ctx: JobContext): Promise<string[]>
  getRunning(ctx: JobContext): Promise<string[]>
}

const ok = async (ctx: JobContext, argv: string[]): Promise<boolean> => (await execArgv(ctx, argv, { timeout: 120 })).retcode === 0

/** Unit names without the `.service` suffix Salt strips, sorted and unique. */
export function unitNames(stdout: string): string[] {
  const names = new Set<string>()
  for (const line of stdout.split('\n')) {
    const unit = line
      .trim()
      .replace(/^\u25cf\s*/, '')
      .split(/\s+/)[0]
    if (unit !== undefined && unit.endsWith('.service')) names.add(unit.slice(0, -'.service'.length))
  }
  return [...names].sort()
}

export const systemdProvider: ServiceProvider = {
  name: 'systemd',
  action: async (ctx, name, action, noBlock) => await ok(ctx, ['systemctl', ...(noBlock ? ['--no-block'] : []), action, name]),
  status: async (ctx, name) => await ok(ctx, ['systemctl', 'is-active', '--quiet', name]),
  enable: async (ctx, name, enable) => await ok(ctx, ['systemctl', enable ? 'enable' : 'disable', name]),
  enabled: async (ctx, name) => await ok(ctx, ['systemctl', 'is-enabled', '--quiet', name]),
  getAll: async (ctx) => {
    const files = await execArgv(ctx, ['systemctl', 'list-unit-files', '--type=service', '--no-legend', '--no-pager'])
    const units = await execArgv(ctx, ['systemctl', 'list-units', '--type=service', '--all', '--no-legend', '--no-pager'])
    return [...new Set([...unitNames(files.stdout), ...unitNames(units.stdout)])].sort()
  },
  getRunning: async (ctx) =>
    unitNames((await execArgv(ctx, ['systemctl', 'list-units', '--type=service', '--state=running', '--no-legend', '--no-pager'])).stdout),
}

const INIT_D = '/etc/init.d'
const NOT_SERVICES = new Set(['README', 'skeleton', 'rc', 'rcS', 'functions'])

/** The runlevel Salt's debian_service reads (`runlevel`), 2 when there is none (a container). */
async function runlevel(ctx: JobContext): Promise<string> {
  const result = await execArgv(ctx, ['runlevel'], { timeout: 10 }).catch(() => undefined)
  const level = result?.stdout.trim().split(/\s+/)[1]
  return level !== undefined && /^[0-6S]$/.test(level) ? level : '2'
}

export const debianProvider: ServiceProvider = {
  name: 'debian_service',
  action: async (ctx, name, action) => await ok(ctx, ['service', name, action]),
  status: async (ctx, name) => await ok(ctx, ['service', name, 'status']),
  enable: async (ctx, name, enable) => {
    if (enable && !(await ok(ctx, ['update-rc.d', name, 'defaults']))) return false
    return await ok(ctx, ['update-rc.d', name, enable ? 'enable' : 'disable'])
  },
  enabled: async (ctx, name) => {
    const level = await runlevel(ctx)
    for (const dir of [`/etc/rc${level}.d`, '/etc/rcS.d']) {
      const links = await readdir(dir).catch(() => [] as string[])
      if (links.some((link) => /^S\d\d/.test(link) && link.slice(3) === name)) return true
    }
    return false
  },
  getAll: async () => {
    const names: string[] = []
    for (const file of await readdir(INIT_D).catch(() => [] as string[])) {
      if (NOT_SERVICES.has(file) || file.startsWith('.')) continue
      const info = await stat(join(INIT_D, file)).catch(() => undefined)
      if (info?.isFile() === true && (info.mode & 0o111) !== 0) names.push(file)
    }
    return names.sort()
  },
  // The services whose status says running: `service --status-all` would also demand status print something.
  getRunning: async (ctx) => {
    const running: string[] = []
    for (const name of await debianProvider.getAll(ctx)) if (await ok(ctx, ['service', name, 'status'])) running.push(name)
    return running
  },
}

/** Salt's rule for systemd (`salt.utils.systemd.booted`); otherwise Debian's tools when they are there. */
export async function chooseServiceProvider(): Promise<ServiceProvider> {
  if (
    await access('/run/systemd/system').then(
      () => true,
      () => false,
    )
  )
    return systemdProvider
  if (
    await access('/usr/sbin/service').then(
      () => true,
      () => false,
    )
  )
    return debianProvider
  if (
    await access(INIT_D).then(
      () => true,
      () => false,
    )
  )
    return debianProvider
  throw new CommandExecutionError('no service provider: systemd is not running and there is no Debian service/init.d')
}

let chosen: Promise<ServiceProvider> | undefined
/** The provider, probed once per minion process (the init system does not change under it). */
const provider = (): Promise<ServiceProvider> => {
  chosen ??= chooseServiceProvider().catch((error: unknown) => {
    chosen = undefined
    throw error
  })
  return chosen
}

const NO_BLOCK = { args: ['name', 'no_block'], defaults: { no_block: false }, kwargs: true } as const

function actionSpec(action: 'start' | 'stop' | 'restart' | 'reload', verb: string): ModuleFunctionSpec {
  return {
    ...NO_BLOCK,
    doc: `${verb} the specified service. Returns True when the init system reports success.\n\nno_block\n    (systemd) Do not wait for the job to finish.\n\nCLI Example:\n\n    brine '*' service.${action} <service name>`,
    run: async ([name, noBlock], _kwargs, ctx) => await (await provider()).action(ctx, requireUnitName(name, 'name'), action, toBool(noBlock, 'no_block')),
  }
}

const hasGlob = (name: string): boolean => /[*?[]/.test(name)

export const serviceModule: ModuleDefinition = {
  start: actionSpec('start', 'Start'),
  stop: actionSpec('stop', 'Stop'),
  restart: actionSpec('restart', 'Restart'),
  reload: actionSpec('reload', 'Reload'),
  status: {
    doc: "Return True if the service is running. With a glob in the name, a dict of each matching service → its status.\n\nCLI Example:\n\n    brine '*' service.status <service name>\n    brine '*' service.status 'web*'",
    args: ['name', 'sig'],
    defaults: { sig: null },
    kwargs: true,
    run: async ([nameArg], _kwargs, ctx) => {
      const name = requireUnitName(nameArg, 'name')
      const chosenProvider = await provider()
      if (!hasGlob(name)) return await chosenProvider.status(ctx, name)
      const result: Record<string, boolean> = {}
      for (const service of (await chosenProvider.getAll(ctx)).filter((candidate) => fnmatch(candidate, name)))
        result[service] = await chosenProvider.status(ctx, service)
      return result
    },
  },
  enable: {
    doc: "Enable the named service to start at boot. Returns True on success.\n\nCLI Example:\n\n    brine '*' service.enable <service name>",
    ...NO_BLOCK,
    run: async ([name], _kwargs, ctx) => await (await provider()).enable(ctx, requireUnitName(name, 'name'), true),
  },
  disable: {
    doc: "Disable the named service from starting at boot. Returns True on success.\n\nCLI Example:\n\n    brine '*' service.disable <service name>",
    ...NO_BLOCK,
    run: async ([name], _kwargs, ctx) => await (await provider()).enable(ctx, requireUnitName(name, 'name'), false),
  },
  enabled: {
    doc: "Return True if the named service is enabled to start at boot.\n\nCLI Example:\n\n    brine '*' service.enabled <service name>",
    args: ['name'],
    kwargs: true,
    run: async ([name], _kwargs, ctx) => await (await provider()).enabled(ctx, requireUnitName(name, 'name')),
  },
  disabled: {
    doc: "Return True if the named service is not enabled to start at boot.\n\nCLI Example:\n\n    brine '*' service.disabled <service name>",
    args: ['name'],
    kwargs: true,
    run: async ([name], _kwargs, ctx) => !(await (await provider()).enabled(ctx, requireUnitName(name, 'name'))),
  },
  available: {
    doc: "Return True if the named service is available.\n\nCLI Example:\n\n    brine '*' service.available sshd",
    args: ['name'],
    run: async ([nameArg], _kwargs, ctx) => {
      const name = requireUnitName(nameArg, 'name')
      return (await (await provider()).getAll(ctx)).includes(name.replace(/\.service$/, ''))
    },
  },
  missing: {
    doc: "The inverse of service.available: True if the named service is not available.\n\nCLI Example:\n\n    brine '*' service.missing sshd",
    args: ['name'],
    run: async ([nameArg], _kwargs, ctx) => {
      const name = requireUnitName(nameArg, 'name')
      return !(await (await provider()).getAll(ctx)).includes(name.replace(/\.service$/, ''))
    },
  },
  get_all: {
    doc: "Return a sorted list of all available services.\n\nCLI Example:\n\n    brine '*' service.get_all",
    run: async (_args, _kwargs, ctx) => await (await provider()).getAll(ctx),
  },
  get_running: {
    doc: "Return a sorted list of the services that are running.\n\nCLI Example:\n\n    brine '*' service.get_running",
    run: async (_args, _kwargs, ctx) => await (await provider()).getRunning(ctx),
  },
}
