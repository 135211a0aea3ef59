/** What `pkg` asks of a system's package manager (apt, dnf): its own module, so the providers and pkg.ts import it without a circle. */
import type { CommandResult } from './cmd.js'
import type { JobContext } from './types.js'

/** Installed packages: name → version. */
export type PackageList = Record<string, string>

/** One package to install: a name (and version), or a local file. */
export interface InstallTarget {
  name: string
  version?: string
  file?: string
}

export interface PackageProvider {
  readonly name: 'apt' | 'dnf'
  list(ctx: JobContext): Promise<PackageList>
  latest(ctx: JobContext, names: string[], refresh: boolean): Promise<Record<string, string>>
  install(ctx: JobContext, targets: InstallTarget[], options: { refresh: boolean; reinstall: boolean }): Promise<CommandResult>
  remove(ctx: JobContext, names: string[], purge: boolean): Promise<CommandResult>
  refresh(ctx: JobContext): Promise<Record<string, boolean | null>>
  listUpgrades(ctx: JobContext, refresh: boolean): Promise<Record<string, string>>
  upgrade(ctx: JobContext, refresh: boolean): Promise<CommandResult>
}
