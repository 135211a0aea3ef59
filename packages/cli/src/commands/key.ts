import type { Logger } from '@brine/transport'
import { globToRegExp } from '@brine/common'
import { WheelClient } from '@brine/client'
import { addCommonOptions, cliLogger, createProgram, EXIT_GENERIC, EXIT_OK, EXIT_USAGE, fail, parseArgv, type CommandIO } from '../io.js'
import { describeClientError } from './brine.js'

/** What `brine-key` needs of @brine/client's WheelClient (tests pass a stand-in). */
export interface KeyWheel {
  cmd(fun: string, kwarg?: Record<string, unknown>): Promise<unknown>
  close(): Promise<void>
}

export interface KeyDeps {
  createClient?: (options: { configDir: string; logger: Logger }) => KeyWheel
}

/** The key states as the master's wheel names them, in the order salt-key prints them. */
export const KEY_DIRS = ['minions', 'minions_denied', 'minions_pre', 'minions_rejected'] as const
export type KeyDir = (typeof KEY_DIRS)[number]
export type KeyListing = Partial<Record<KeyDir, string[]>>

const TITLES: Record<KeyDir, string> = {
  minions: 'Accepted Keys:',
  minions_denied: 'Denied Keys:',
  minions_pre: 'Unaccepted Keys:',
  minions_rejected: 'Rejected Keys:',
}

/** `-l` arguments, Salt's spellings. */
const LIST_NAMES: Record<string, KeyDir | 'all'> = {
  pre: 'minions_pre',
  un: 'minions_pre',
  unaccepted: 'minions_pre',
  acc: 'minions',
  accepted: 'minions',
  rej: 'minions_rejected',
  rejected: 'minions_rejected',
  den: 'minions_denied',
  denied: 'minions_denied',
  all: 'all',
}

/** salt-key's listing: each state's title, then its ids, sorted. */
export function formatKeyListing(listing: KeyListing, only?: readonly KeyDir[]): string {
  let out = ''
  for (const dir of KEY_DIRS) {
    if (only !== undefined && !only.includes(dir)) continue
    out += `${TITLES[dir]}\n`
    for (const id of [...(listing[dir] ?? [])].sort()) out += `${id}\n`
  }
  return out
}

/** salt-key's finger listing: `id:  fingerprint` under each state's title. */
export function formatFingers(fingers: Partial<Record<string, Record<string, string>>>): string {
  let out = ''
  const local = fingers['local']
  if (local !== undefined) {
    out += 'Local Keys:\n'
    for (const [name, finger] of Object.entries(local).sort()) out += `${name}:  ${finger}\n`
  }
  for (const dir of KEY_DIRS) {
    const entries = fingers[dir]
    if (entries === undefined) continue
    out += `${TITLES[dir]}\n`
    for (const [id, finger] of Object.entries(entries).sort()) out += `${id}:  ${finger}\n`
  }
  return out
}

type Action =
  | { kind: 'list'; dirs: KeyDir[] | undefined }
  | { kind: 'accept' | 'reject' | 'delete'; glob: string }
  | { kind: 'finger'; glob: string }

interface KeyArgs {
  configDir: string
  logLevel: string
  action: Action
  yes: boolean
  includeRejected: boolean
  includeDenied: boolean
  includeAccepted: boolean
}

export function parseKeyArgs(argv: readonly string[], io: CommandIO): KeyArgs | number {
  const program = addCommonOptions(createProgram('brine-key', io), { shortLogLevel: false })
    .description("Manage minion keys on the running master (Salt's `salt-key`).")
    .option('-L, --list-all', 'list every key')
    .option('-l, --list <state>', 'list the keys in one state: pre|un|unaccepted, acc|accepted, rej|rejected, den|denied, all')
    .option('-a, --accept <glob>', 'accept the pending keys matching the glob')
    .option('-A, --accept-all', 'accept every pending key')
    .option('-r, --reject <glob>', 'reject the pending keys matching the glob')
    .option('-R, --reject-all', 'reject every pending key')
    .option('-d, --delete <glob>', 'delete the keys matching the glob, in any state')
    .option('-D, --delete-all', 'delete every key')
    .option('-f, --finger <glob>', 'print the fingerprints of the keys matching the glob')
    .option('-F, --finger-all', 'print every fingerprint')
    .option('-y, --yes', 'answer yes to every question')
    .option('--include-rejected', 'accept also rejected keys')
    .option('--include-denied', 'accept or reject also denied keys')
    .option('--include-accepted', 'reject also accepted keys')
  const code = parseArgv(program, argv)
  if (code !== undefined) return code
  const o = program.opts<Record<string, unknown>>()
  const actions: Action[] = []
  if (o.listAll === true) actions.push({ kind: 'list', dirs: undefined })
  if (typeof o.list === 'string') {
    const dir = LIST_NAMES[o.list]
    if (dir === undefined) {
      io.stderr.write(`brine-key: error: option '-l, --list <state>' got '${o.list}'; use one of ${Object.keys(LIST_NAMES).join(', ')}\n`)
      return EXIT_USAGE
    }
    actions.push({ kind: 'list', dirs: dir === 'all' ? undefined : [dir] })
  }
  for (const [kind, one, all] of [
    ['accept', 'accept', 'acceptAll'],
    ['reject', 'reject', 'rejectAll'],
    ['delete', 'delete', 'deleteAll'],
    ['finger', 'finger', 'fingerAll'],
  ] as const) {
    if (typeof o[one] === 'string') actions.push({ kind, glob: o[one] as string })
    if (o[all] === true) actions.push({ kind, glob: '*' })
  }
  if (actions.length > 1) {
    io.stderr.write('brine-key: error: give one action at a time (-L, -l, -a, -A, -r, -R, -d, -D, -f or -F)\n')
    return EXIT_USAGE
  }
  const level = String(o.logLevel)
  return {
    configDir: String(o.configDir),
    logLevel: level,
    action: actions[0] ?? { kind: 'list', dirs: undefined },
    yes: o.yes === true,
    includeRejected: o.includeRejected === true,
    includeDenied: o.includeDenied === true,
    includeAccepted: o.includeAccepted === true,
  }
}

const PAST: Record<'accept' | 'reject' | 'delete', string> = { accept: 'accepted', reject: 'rejected', delete: 'deleted' }

/** `brine-key`: 0 done, 1 failed or nothing matched, 2 usage error or refused without -y. */
export async function runKey(argv: readonly string[], io: CommandIO, deps: KeyDeps = {}): Promise<number> {
  const parsed = parseKeyArgs(argv, io)
  if (typeof parsed === 'number') return parsed
  const args = parsed
  const logger = cliLogger(args.logLevel, io, 'brine-key')
  const client = deps.createClient?.({ configDir: args.configDir, logger }) ?? new WheelClient({ configDir: args.configDir, logger })
  // The same wheel path WheelClient users get (salt-key does the same through salt.wheel).
  const wheel = (fun: string, extra: Record<string, unknown> = {}): Promise<unknown> => client.cmd(fun, extra)
  try {
    const { action } = args
    if (action.kind === 'list') {
      io.stdout.write(formatKeyListing((await wheel('key.list_all')) as KeyListing, action.dirs))
      return EXIT_OK
    }
    if (action.kind === 'finger') {
      io.stdout.write(formatFingers((await wheel('key.finger', { match: action.glob })) as Record<string, Record<string, string>>))
      return EXIT_OK
    }
    // Which states the action reads from, as salt-key decides.
    const from: KeyDir[] =
      action.kind === 'delete'
        ? [...KEY_DIRS]
        : action.kind === 'accept'
          ? ['minions_pre', ...(args.includeRejected ? (['minions_rejected'] as const) : []), ...(args.includeDenied ? (['minions_denied'] as const) : [])]
          : ['minions_pre', ...(args.includeAccepted ? (['minions'] as const) : []), ...(args.includeDenied ? (['minions_denied'] as const) : [])]
    const listing = (await wheel('key.list_all')) as KeyListing
    const pattern = globToRegExp(action.glob)
    const matched: KeyListing = {}
    const ids: string[] = []
    for (const dir of from) {
      const hits = (listing[dir] ?? []).filter((id) => pattern.test(id)).sort()
      if (hits.length === 0) continue
      matched[dir] = hits
      ids.push(...hits)
    }
    if (ids.length === 0) {
      const which = action.kind === 'delete' ? '' : action.kind === 'accept' ? ' unaccepted' : ' pending'
      io.stderr.write(`The key glob '${action.glob}' does not match any${which} keys.\n`)
      return EXIT_GENERIC
    }
    if (!args.yes) {
      if (io.prompt === undefined) {
        io.stderr.write(`brine-key: refusing to ${action.kind} keys without a terminal to confirm on; use -y\n`)
        return EXIT_USAGE
      }
      io.stdout.write(`The following keys are going to be ${PAST[action.kind]}:\n${formatKeyListing(matched, from.filter((dir) => matched[dir] !== undefined))}`)
      // Salt's defaults: yes for accept and reject, no for delete.
      const defaultYes = action.kind !== 'delete'
      const answer = (await io.prompt(defaultYes ? 'Proceed? [n/Y] ' : 'Proceed? [N/y] ')).trim().toLowerCase()
      const proceed = answer === '' ? defaultYes : answer.startsWith('y')
      if (!proceed) return EXIT_OK
    }
    const extra: Record<string, unknown> = { match: ids }
    if (args.includeRejected) extra.include_rejected = true
    if (args.includeDenied) extra.include_denied = true
    if (args.includeAccepted) extra.include_accepted = true
    const result = (await wheel(`key.${action.kind}`, extra)) as KeyListing
    const done = new Set(Object.values(result ?? {}).flat())
    for (const id of [...done].sort()) io.stdout.write(`Key for minion ${id} ${PAST[action.kind]}.\n`)
    return EXIT_OK
  } catch (error) {
    return fail(io, 'brine-key', describeClientError(error))
  } finally {
    await client.close()
  }
}
