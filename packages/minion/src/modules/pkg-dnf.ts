/** The dnf/rpm provider of `pkg` (salt/modules/yumpkg.py): rpm for what is installed, dnf for changes. */
import type { CommandResult } from './cmd.js'
import type { PackageList, PackageProvider } from './pkg-provider.js'
import type { JobContext } from './types.js'
import { execArgv } from './validate.js'

const dnf = (ctx: JobContext, argv: string[]): Promise<CommandResult> => execArgv(ctx, ['dnf', '-y', ...argv], { timeout: 1800 })

async function list(ctx: JobContext): Promise<PackageList> {
  const result = await execArgv(ctx, ['rpm', '-qa', '--queryformat', '%{NAME}\t%{EPOCH}\t%{VERSION}-%{RELEASE}\n'])
  const installed: PackageList = {}
  for (const line of result.stdout.split('\n')) {
    const [name, epoch, version] = line.split('\t')
    if (name === undefined || version === undefined || name === '') continue
    installed[name] = epoch === undefined || epoch === '(none)' || epoch === '0' ? version : `${epoch}:${version}`
  }
  return installed
}

/** `dnf check-update` lines (`name.arch  version  repo`) → name → version; exit 100 means there are some. */
export function parseCheckUpdate(stdout: string): Record<string, string> {
  const upgrades: Record<string, string> = {}
  for (const line of stdout.split('\n')) {
    const match = /^(\S+)\.\S+\s+(\S+)\s+\S+$/.exec(line.trim())
    if (match !== null) upgrades[match[1] as string] = match[2] as string
  }
  return upgrades
}

export const dnfProvider: PackageProvider = {
  name: 'dnf',
  list,
  latest: async (ctx, names, refresh) => {
    const found = parseCheckUpdate((await dnf(ctx, ['-q', ...(refresh ? ['--refresh'] : []), 'check-update', ...names])).stdout)
    return Object.fromEntries(names.map((name) => [name, found[name] ?? '']))
  },
  install: async (ctx, targets, options) => {
    const items = targets.map((target) => target.file ?? (target.version === undefined ? target.name : `${target.name}-${target.version}`))
    return await dnf(ctx, [...(options.refresh ? ['--refresh'] : []), options.reinstall ? 'reinstall' : 'install', ...items])
  },
  // rpm keeps no separate configuration to purge: remove and purge are the same, as in Salt's yumpkg.
  remove: async (ctx, names) => await dnf(ctx, ['remove', ...names]),
  refresh: async (ctx) => ({ dnf: (await dnf(ctx, ['makecache'])).retcode === 0 }),
  listUpgrades: async (ctx, refresh) => parseCheckUpdate((await dnf(ctx, ['-q', ...(refresh ? ['--refresh'] : []), 'check-update'])).stdout),
  upgrade: async (ctx, refresh) => await dnf(ctx, [...(refresh ? ['--refresh'] : []), 'upgrade']),
}
