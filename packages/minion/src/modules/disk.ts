/** Salt's `disk` module (salt/modules/disk.py): block and inode usage per mount point, from POSIX `df`. */
import { CommandExecutionError } from '../errors.js'
import type { JobContext, ModuleDefinition } from './types.js'
import { badArgument, execArgv, isSet } from './validate.js'

/** The df flags Salt passes through (`args`): single letters only, never a path or a long option. */
function dfFlags(args: unknown): string[] {
  if (!isSet(args) || args === '') return []
  if (typeof args !== 'string' || !/^-?[ahklTx]+$/.test(args)) throw badArgument('args', "df flags such as '-a' or '-l' (letters a, h, k, l, T, x)", args)
  return [args.startsWith('-') ? args : `-${args}`]
}

/** Runs df and maps each mount point (the last columns: it may hold spaces) to a row of named fields. */
async function df(ctx: JobContext, flags: string[], fields: readonly string[]): Promise<Record<string, Record<string, string>>> {
  const result = await execArgv(ctx, ['df', '-P', ...flags], { timeout: 60 })
  if (result.retcode !== 0 && result.stdout === '') throw new CommandExecutionError(`df failed: ${result.stderr.trim()}`)
  const usage: Record<string, Record<string, string>> = {}
  for (const line of result.stdout.split('\n').slice(1)) {
    const columns = line.trim().split(/\s+/)
    if (columns.length < 6) continue
    const mount = columns.slice(5).join(' ')
    usage[mount] = Object.fromEntries(fields.map((field, index) => [field, columns[index] as string]))
  }
  return usage
}

export const diskModule: ModuleDefinition = {
  usage: {
    doc: "Return usage information for volumes mounted on this minion: mount point → filesystem, 1K-blocks, used, available, capacity (df's strings).\n\nargs\n    df flags, e.g. '-a' (all), '-l' (local).\n\nCLI Example:\n\n    brine '*' disk.usage",
    args: ['args'],
    defaults: { args: null },
    run: async ([args], _kwargs, ctx) => await df(ctx, dfFlags(args), ['filesystem', '1K-blocks', 'used', 'available', 'capacity']),
  },
  inodeusage: {
    doc: "Return inode usage information for volumes mounted on this minion: mount point → inodes, used, free, use, filesystem.\n\nCLI Example:\n\n    brine '*' disk.inodeusage",
    args: ['args'],
    defaults: { args: null },
    run: async ([args], _kwargs, ctx) => {
      const rows = await df(ctx, ['-i', ...dfFlags(args)], ['filesystem', 'inodes', 'used', 'free', 'use'])
      return Object.fromEntries(
        Object.entries(rows).map(([mount, row]) => [mount, { inodes: row.inodes, used: row.used, free: row.free, use: row.use, filesystem: row.filesystem }]),
      )
    },
  },
}
