/** Salt's `status` module (salt/modules/status.py), the Linux part: uptime, load, memory, CPU, disks, network counters from /proc. */
import { readFile, statfs } from 'node:fs/promises'
import { loadavg } from 'node:os'
import { msFromSeconds, secondsFromMs } from '@brine/config'
import { translatePythonRegex } from '@brine/targeting'
import { CommandExecutionError, InvocationError } from '../errors.js'
import type { JobContext, ModuleDefinition } from './types.js'
import { execArgv, requireString } from './validate.js'

async function proc(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8')
  } catch (error) {
    throw new CommandExecutionError(`cannot read ${file}: ${(error as Error).message}`, { file })
  }
}

/** Salt's uptime dict: seconds, since_iso, since_t, days, time (H:MM), users. */
async function uptime(ctx: JobContext): Promise<Record<string, unknown>> {
  const seconds = Math.trunc(Number((await proc('/proc/uptime')).split(/\s+/)[0]))
  const since = new Date(Date.now() - msFromSeconds(seconds))
  const who = await execArgv(ctx, ['who'], { timeout: 10 }).catch(() => undefined)
  const remainder = seconds % 86400
  return {
    seconds,
    since_iso: since.toISOString().replace('Z', ''),
    since_t: Math.trunc(secondsFromMs(since.getTime())),
    days: Math.trunc(seconds / 86400),
    time: `${Math.trunc(remainder / 3600)}:${String(Math.trunc((remainder % 3600) / 60)).padStart(2, '0')}`,
    users: who?.retcode === 0 ? who.stdout.split('\n').filter(Boolean).length : 0,
  }
}

/** /proc/meminfo as Salt returns it: key → {value, unit}. */
function parseMeminfo(text: string): Record<string, { value: string; unit?: string }> {
  const info: Record<string, { value: string; unit?: string }> = {}
  for (const line of text.split('\n')) {
    const match = /^([^:]+):\s+(\d+)(?:\s+(\S+))?/.exec(line)
    if (match === null) continue
    info[match[1] as string] = match[3] === undefined ? { value: match[2] as string } : { value: match[2] as string, unit: match[3] }
  }
  return info
}

/** /proc/cpuinfo as Salt's Linux cpuinfo returns it: one flat dict, `flags` split into a list. */
function parseCpuinfo(text: string): Record<string, unknown> {
  const info: Record<string, unknown> = {}
  for (const line of text.split('\n')) {
    const at = line.indexOf(':')
    if (at === -1) continue
    const key = line.slice(0, at).trim()
    const value = line.slice(at + 1).trim()
    info[key] = key === 'flags' ? value.split(/\s+/).filter(Boolean) : value
  }
  return info
}

/** /proc/net/netstat (and snmp) pairs of header and value lines → section → counter → number. */
function parseNetstat(text: string): Record<string, Record<string, number>> {
  const sections: Record<string, Record<string, number>> = {}
  const lines = text.split('\n').filter(Boolean)
  for (let index = 0; index + 1 < lines.length; index += 2) {
    const names = (lines[index] as string).split(/\s+/)
    const values = (lines[index + 1] as string).split(/\s+/)
    const section = (names[0] as string).replace(/:$/, '')
    sections[section] = Object.fromEntries(names.slice(1).map((name, at) => [name, Number(values[at + 1])]))
  }
  return sections
}

/** status.diskusage: paths, or `^regex` filesystem types, or every mount; path → {total, available} bytes. */
async function diskusage(args: readonly unknown[]): Promise<Record<string, { total: number; available: number }>> {
  const mounts = (await proc('/proc/mounts'))
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' '))
  const paths = new Set<string>()
  for (const arg of args.length === 0 ? [null] : args) {
    if (arg === null) {
      for (const [, mount] of mounts) paths.add((mount as string).replace(/\\040/g, ' '))
      continue
    }
    const text = requireString(arg, 'args')
    if (!text.startsWith('^')) {
      paths.add(text)
      continue
    }
    let regex: RegExp
    try {
      const translated = translatePythonRegex(text)
      regex = new RegExp(translated.source, translated.flags)
    } catch (error) {
      throw new InvocationError(`args ${JSON.stringify(text)} is not a valid filesystem-type regex: ${(error as Error).message}`, { argument: 'args' })
    }
    for (const [, mount, type] of mounts) if (regex.test(type as string)) paths.add((mount as string).replace(/\\040/g, ' '))
  }
  const usage: Record<string, { total: number; available: number }> = {}
  for (const path of paths) {
    const stats = await statfs(path).catch(() => undefined)
    if (stats !== undefined) usage[path] = { total: stats.blocks * stats.bsize, available: stats.bavail * stats.bsize }
  }
  return usage
}

export const statusModule: ModuleDefinition = {
  uptime: {
    doc: "Return the uptime for this system: seconds, since_iso, since_t, days, time (H:MM), users.\n\nCLI Example:\n\n    brine '*' status.uptime",
    run: async (_args, _kwargs, ctx) => await uptime(ctx),
  },
  loadavg: {
    doc: "Return the load averages for this minion: 1-min, 5-min, 15-min.\n\nCLI Example:\n\n    brine '*' status.loadavg",
    run: async () => {
      const [one, five, fifteen] = loadavg()
      return { '1-min': one, '5-min': five, '15-min': fifteen }
    },
  },
  meminfo: {
    doc: "Return the memory info for this minion (/proc/meminfo): key → {value, unit}.\n\nCLI Example:\n\n    brine '*' status.meminfo",
    run: async () => parseMeminfo(await proc('/proc/meminfo')),
  },
  cpuinfo: {
    doc: "Return the CPU info for this minion (/proc/cpuinfo, the last processor's block; flags as a list).\n\nCLI Example:\n\n    brine '*' status.cpuinfo",
    run: async () => parseCpuinfo(await proc('/proc/cpuinfo')),
  },
  diskusage: {
    doc: "Return the disk usage for this minion: path → {total, available} in bytes. Arguments are paths, or regexes (starting with ^) over filesystem types; none means every mount.\n\nCLI Example:\n\n    brine '*' status.diskusage [paths and/or filesystem types]\n    brine '*' status.diskusage / '^ext[34]'",
    varargs: true,
    run: async (args) => await diskusage(args),
  },
  netstats: {
    doc: "Return the network stats for this minion (/proc/net/netstat): section → counter → value.\n\nCLI Example:\n\n    brine '*' status.netstats",
    run: async () => parseNetstat(await proc('/proc/net/netstat')),
  },
}
