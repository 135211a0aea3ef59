/** The apt/dpkg provider of `pkg` (salt/modules/aptpkg.py): dpkg-query for what is installed, apt-get and dpkg for changes. */
import type { CommandResult } from './cmd.js'
import type { InstallTarget, PackageList, PackageProvider } from './pkg-provider.js'
import type { JobContext } from './types.js'
import { execArgv } from './validate.js'

/** apt-get never asks, and keeps a changed config file, as Salt's aptpkg runs it. */
const APT_ENV = { DEBIAN_FRONTEND: 'noninteractive', APT_LISTBUGS_FRONTEND: 'none', APT_LISTCHANGES_FRONTEND: 'none' }
const APT_GET = ['apt-get', '-q', '-y', '-o', 'DPkg::Options::=--force-confold', '-o', 'DPkg::Options::=--force-confdef']
const apt = (ctx: JobContext, argv: string[]): Promise<CommandResult> => execArgv(ctx, argv, { env: APT_ENV, timeout: 1800 })

async function list(ctx: JobContext): Promise<PackageList> {
  const result = await execArgv(ctx, ['dpkg-query', '--showformat=${Status}\t${Package}\t${Version}\n', '-W'])
  const installed: PackageList = {}
  for (const line of result.stdout.split('\n')) {
    const [status, name, version] = line.split('\t')
    if (status?.endsWith(' installed') === true && name !== undefined && version !== undefined) installed[name] = version
  }
  return installed
}

/** `apt-cache policy`: each package's Installed and Candidate versions. */
async function policy(ctx: JobContext, names: string[]): Promise<Record<string, { installed: string; candidate: string }>> {
  const result = await execArgv(ctx, ['apt-cache', '-q', 'policy', ...names], { env: APT_ENV })
  const found: Record<string, { installed: string; candidate: string }> = {}
  let current: { installed: string; candidate: string } | undefined
  for (const line of result.stdout.split('\n')) {
    const header = /^(\S+):$/.exec(line)
    if (header !== null) {
      current = { installed: '', candidate: '' }
      found[(header[1] as string).replace(/:[a-z0-9]+$/, '')] = current
      continue
    }
    const field = /^\s+(Installed|Candidate):\s+(\S+)/.exec(line)
    if (field === null || current === undefined) continue
    const value = field[2] === '(none)' ? '' : (field[2] as string)
    if (field[1] === 'Installed') current.installed = value
    else current.candidate = value
  }
  return found
}

/** `apt-get update` output: Get → True, Hit → None, Ign/Err → False, per repository URL (Salt's refresh_db). */
export function parseUpdate(stdout: string): Record<string, boolean | null> {
  const repos: Record<string, boolean | null> = {}
  for (const line of stdout.split('\n')) {
    const match = /^(Get|Hit|Ign|Err):?\d*\s+(\S+\s+\S+)/.exec(line)
    if (match === null) continue
    repos[match[2] as string] = match[1] === 'Get' ? true : match[1] === 'Hit' ? null : false
  }
  return repos
}

/** `apt-get --just-print dist-upgrade`: `Inst name [old] (new …)` lines → name → new version. */
export function parseJustPrint(stdout: string): Record<string, string> {
  const upgrades: Record<string, string> = {}
  for (const line of stdout.split('\n')) {
    const match = /^Inst (\S+) (?:\[[^\]]*\] )?\((\S+)/.exec(line)
    if (match !== null) upgrades[match[1] as string] = match[2] as string
  }
  return upgrades
}

export const aptProvider: PackageProvider = {
  name: 'apt',
  list,
  latest: async (ctx, names, refresh) => {
    if (refresh) await apt(ctx, ['apt-get', '-q', 'update'])
    const found = await policy(ctx, names)
    return Object.fromEntries(
      names.map((name) => {
        const entry = found[name]
        return [name, entry === undefined || entry.candidate === entry.installed ? '' : entry.candidate]
      }),
    )
  },
  install: async (ctx, targets: InstallTarget[], options) => {
    if (options.refresh) await apt(ctx, ['apt-get', '-q', 'update'])
    const files = targets.flatMap((target) => (target.file === undefined ? [] : [target.file]))
    if (files.length > 0) return await apt(ctx, ['dpkg', '-i', '--force-confold', ...files])
    const names = targets.map((target) => (target.version === undefined ? target.name : `${target.name}=${target.version}`))
    return await apt(ctx, [...APT_GET, ...(options.reinstall ? ['--reinstall'] : []), 'install', ...names])
  },
  remove: async (ctx, names, purge) => await apt(ctx, [...APT_GET, purge ? 'purge' : 'remove', ...names]),
  refresh: async (ctx) => parseUpdate((await apt(ctx, ['apt-get', '-q', 'update'])).stdout),
  listUpgrades: async (ctx, refresh) => {
    if (refresh) await apt(ctx, ['apt-get', '-q', 'update'])
    return parseJustPrint((await apt(ctx, ['apt-get', '--just-print', 'dist-upgrade'])).stdout)
  },
  upgrade: async (ctx, refresh) => {
    if (refresh) await apt(ctx, ['apt-get', '-q', 'update'])
    return await apt(ctx, [...APT_GET, 'upgrade'])
  },
}
