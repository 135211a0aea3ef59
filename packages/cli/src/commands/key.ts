import { Option, type Command } from 'commander'
import { silentLogger, type Logger } from '@brine/core'
import { loadConfig, type MasterConfig } from '@brine/config'
import { escapeNonAscii, fingerprint, loadOrCreateKeys, matchIds, mixedScripts, publicKeysOf } from '@brine/crypt'
import { WheelClient } from '@brine/client'
import { comparePython, outputSettings, OUTPUTTERS, renderOutput, type OutputFlags, type OutputSettings } from '../output/index.js'
import { cliLogger, EXIT_OK, fail, usageError, type CommandIO } from '../io.js'
import { addCommonOptions, createProgram, integer, parseArgv } from '../program.js'
import { describeClientError } from './client-error.js'

/** What `brine-key` needs of @brine/client's WheelClient (tests pass a stand-in). */
export interface KeyWheel {
  cmd(fun: string, kwarg?: Record<string, unknown>): Promise<unknown>
  close(): Promise<void>
}

export interface KeyDeps {
  createClient?: (options: { configDir: string; logger: Logger; opts: MasterConfig }) => KeyWheel
}

/** The key states in the order Salt's Key.list_keys returns them (what `--out json` shows unsorted). */
export const KEY_DIRS = ['minions', 'minions_pre', 'minions_rejected', 'minions_denied'] as const
export type KeyDir = (typeof KEY_DIRS)[number]
/** Salt's four states, and `syndics`: the accepted keys marked as syndics' (shown once there is one). */
export type KeyListing = Partial<Record<KeyDir | 'syndics', string[]>>

/** `-l` takes any word starting with one of these, as salt-key does (`acc`, `accepted`, `un`, `unaccepted`, …). */
const LIST_PREFIXES: ReadonlyArray<[prefix: string, dir: KeyDir | 'syndics' | 'all']> = [
  ['acc', 'minions'],
  ['pre', 'minions_pre'],
  ['un', 'minions_pre'],
  ['rej', 'minions_rejected'],
  ['den', 'minions_denied'],
  ['syn', 'syndics'],
  ['all', 'all'],
]

type Action =
  | { kind: 'list'; dir: KeyDir | 'syndics' | 'all' }
  | { kind: 'accept' | 'reject' | 'delete' | 'finger' | 'print' | 'accept_syndic'; match: string }
  | { kind: 'gen_keys'; name: string; dir: string }

export interface KeyArgs {
  configDir: string
  logLevel: string
  action: Action
  yes: boolean
  includeRejected: boolean
  includeDenied: boolean
  includeAccepted: boolean
  output: OutputFlags
}

/** brine-key's options, salt-key's names. */
function keyProgram(io: CommandIO): Command {
  return addCommonOptions(createProgram('brine-key', io), { shortLogLevel: false })
    .description("Manage minion keys on the running master (Salt's `salt-key`).")
    .option('-L, --list-all', 'list every key')
    .option('-l, --list <state>', 'list the keys in one state: pre|un|unaccepted, acc|accepted, rej|rejected, den|denied, syn|syndics, all')
    .option('-a, --accept <glob>', 'accept the pending keys matching the glob (several: a,b)')
    .option('-A, --accept-all', 'accept every pending key')
    .option('--accept-syndic <glob>', "accept the matching pending keys, and mark them and matching accepted ones, as syndics' keys (docs/security.md)")
    .option('-r, --reject <glob>', 'reject the pending keys matching the glob')
    .option('-R, --reject-all', 'reject every pending key')
    .option('-d, --delete <glob>', 'delete the keys matching the glob, in any state')
    .option('-D, --delete-all', 'delete every key')
    .option('-f, --finger <glob>', 'print the fingerprints of the keys matching the glob')
    .option('-F, --finger-all', 'print every fingerprint')
    .option('-p, --print <glob>', 'print the public keys matching the glob')
    .option('-P, --print-all', 'print every public key')
    .option('--gen-keys <name>', 'generate a key pair <name>.key and <name>.pub (in --gen-keys-dir) and print its fingerprint')
    .option('--gen-keys-dir <dir>', 'where --gen-keys writes', '.')
    .option('--keysize <bits>', "Salt's RSA key size (2048-32768); accepted and not used: Brine's keys are X25519 and Ed25519", integer)
    .option('-y, --yes', 'answer yes to every question')
    .option('--include-rejected', 'accept also rejected keys')
    .option('--include-accepted', 'reject also accepted keys')
    .option('--include-denied', 'accept or reject also denied keys')
    .option('--include-all', 'accept also rejected keys, reject also accepted keys')
    .addOption(new Option('--out <outputter>', 'how to print listings').choices([...OUTPUTTERS, 'key']))
    .option('--out-indent <n>', 'indent for json and yaml output (negative: one line)', integer)
    .option('--no-color', 'never colour the output')
    .option('--force-color', 'colour the output even when it is not a terminal')
    .allowExcessArguments(true)
}

export function parseKeyArgs(argv: readonly string[], io: CommandIO): KeyArgs | number {
  const program = keyProgram(io)
  const code = parseArgv(program, argv)
  if (code !== undefined) return code
  const o = program.opts<Record<string, unknown>>()
  const extraProblem = checkExtraArguments(program.args, o)
  if (extraProblem !== undefined) return usageError(io, 'brine-key', extraProblem, program.usage())
  const actions: Action[] = []
  const keysizeProblem = checkKeysize(o.keysize)
  if (keysizeProblem !== undefined) return usageError(io, 'brine-key', keysizeProblem, program.usage())
  if (typeof o.keysize === 'number') io.stderr.write("brine-key: note: --keysize is not used: Brine's keys are X25519 and Ed25519, of one size each\n")
  if (typeof o.genKeys === 'string') actions.push({ kind: 'gen_keys', name: o.genKeys, dir: String(o.genKeysDir) })
  if (o.listAll === true) actions.push({ kind: 'list', dir: 'all' })
  if (typeof o.list === 'string') {
    const list = o.list
    const dir = LIST_PREFIXES.find(([prefix]) => list.startsWith(prefix))?.[1]
    if (dir === undefined) return usageError(io, 'brine-key', `'${list}' is not a valid argument to '--list'`, program.usage())
    actions.push({ kind: 'list', dir })
  }
  for (const [kind, one, all] of [
    ['accept', 'accept', 'acceptAll'],
    ['accept_syndic', 'acceptSyndic', 'acceptSyndic'],
    ['reject', 'reject', 'rejectAll'],
    ['delete', 'delete', 'deleteAll'],
    ['finger', 'finger', 'fingerAll'],
    ['print', 'print', 'printAll'],
  ] as const) {
    if (typeof o[one] === 'string') actions.push({ kind, match: o[one] as string })
    if (o[all] === true) actions.push({ kind, match: '*' })
  }
  if (actions.length > 1)
    return usageError(
      io,
      'brine-key',
      'give one action at a time (-L, -l, -a, -A, --accept-syndic, -r, -R, -d, -D, -f, -F, -p, -P or --gen-keys)',
      program.usage(),
    )
  const output: OutputFlags = {}
  if (typeof o.out === 'string') output.out = o.out
  if (typeof o.outIndent === 'number') output.outIndent = o.outIndent
  if (o.forceColor === true) output.color = true
  else if (o.color === false) output.color = false
  const includeAll = o.includeAll === true
  const action = actions[0] ?? { kind: 'list', dir: 'all' }
  return {
    configDir: String(o.configDir),
    logLevel: String(o.logLevel),
    action,
    yes: o.yes === true,
    // salt-key's _update_opts: --include-all widens accept to rejected keys and reject to accepted ones.
    includeRejected: action.kind === 'accept' && (includeAll || o.includeRejected === true),
    includeAccepted: action.kind === 'reject' && (includeAll || o.includeAccepted === true),
    includeDenied: o.includeDenied === true,
    output,
  }
}

const PAST: Record<'accept' | 'reject' | 'delete', string> = { accept: 'accepted', reject: 'rejected', delete: 'deleted' }

/** salt.utils.data.sorted_ignorecase. */
const sortedIgnoreCase = (ids: readonly string[]): string[] => [...ids].sort(comparePython).sort((a, b) => comparePython(a.toLowerCase(), b.toLowerCase()))

/** The master's listing in Salt's state order, each list sorted as Salt's Key.list_keys sorts it. */
function normalizeListing(listing: KeyListing): Record<KeyDir, string[]> & { syndics?: string[] } {
  const out: Record<KeyDir, string[]> & { syndics?: string[] } = Object.fromEntries(
    KEY_DIRS.map((dir) => [dir, sortedIgnoreCase(listing[dir] ?? [])]),
  ) as Record<KeyDir, string[]>
  if (listing.syndics !== undefined && listing.syndics.length > 0) out.syndics = sortedIgnoreCase(listing.syndics)
  return out
}

/**
 * Salt's name_match: `a,b` is two globs; each state keeps the ids any of them matches. Where Brine
 * differs: a pattern that is the exact name of a key matches that key only (crypt's matchIds, as the
 * master matches), so an id such as `x[1]` can be accepted or deleted by its own name.
 */
function nameMatch(listing: Record<KeyDir, string[]>, match: string): KeyListing {
  const patterns = match.split(',')
  const known = new Set(KEY_DIRS.flatMap((dir) => listing[dir]))
  const out: KeyListing = {}
  for (const dir of KEY_DIRS) {
    const hits = matchIds(listing[dir], patterns, known)
    if (hits.length > 0) out[dir] = hits
  }
  return out
}

/**
 * One stderr line per listed id whose letters mix scripts the way a look-alike does (`wеb1` with a
 * Cyrillic `е`), naming the scripts and spelling the id out; stdout (the listing) stays as Salt prints it.
 */
function warnMixedScripts(listing: KeyListing, io: CommandIO): void {
  const ids = new Set(Object.values(listing).flatMap((list) => list ?? []))
  for (const id of [...ids].sort(comparePython)) {
    const scripts = mixedScripts(id)
    if (scripts === undefined) continue
    io.stderr.write(
      `brine-key: warning: minion id ${JSON.stringify(id)} (${escapeNonAscii(id)}) mixes scripts (${scripts.join(', ')}); it may imitate another id\n`,
    )
  }
}

/**
 * `brine-key`, Salt's `salt-key`: exit 0 when done, when the glob matched nothing (Salt's message
 * on stdout) and when the answer was no; 1 when the master could not do it; 64 for a usage error
 * (a bad `-l` state, two actions, no terminal to confirm on without `-y`).
 */
export async function runKey(argv: readonly string[], io: CommandIO, deps: KeyDeps = {}): Promise<number> {
  const parsed = parseKeyArgs(argv, io)
  if (typeof parsed === 'number') return parsed
  const args = parsed
  const logger = cliLogger(args.logLevel, io, 'brine-key')
  let opts: MasterConfig
  try {
    opts = (await loadConfig('master', { configDir: args.configDir, logger })).opts
  } catch (error) {
    return fail(io, 'brine-key', describeClientError(error))
  }
  const output = outputSettings(opts, args.output, io.stdout.isTTY === true)
  const print = (data: unknown): void => {
    io.stdout.write(renderOutput(output.out ?? 'key', data, output))
  }
  const { action } = args
  if (action.kind === 'gen_keys') return genKeys(action, io, print)
  const client = deps.createClient?.({ configDir: args.configDir, logger, opts }) ?? new WheelClient({ opts, logger, origin: { client: 'cli' } })
  // The same wheel path WheelClient users get (salt-key does the same through salt.wheel).
  const wheel = (fun: string, extra: Record<string, unknown> = {}): Promise<unknown> => client.cmd(fun, extra)
  try {
    if (action.kind === 'list') {
      const listing = normalizeListing((await wheel('key.list_all')) as KeyListing)
      const shown = action.dir === 'all' ? listing : { [action.dir]: listing[action.dir] ?? [] }
      print(shown)
      warnMixedScripts(shown, io)
      return EXIT_OK
    }
    if (action.kind === 'finger' || action.kind === 'print') {
      print(await wheel(`key.${action.kind}`, { match: action.match.split(',') }))
      return EXIT_OK
    }
    if (action.kind === 'accept_syndic') return await acceptSyndic(action.match, args, io, output, wheel)
    return await changeKeys(action.kind, action.match, args, io, output, wheel)
  } catch (error) {
    return fail(io, 'brine-key', describeClientError(error))
  } finally {
    await client.close()
  }
}

/**
 * Salt's documentation has operators type `salt-key -F master` to read the master's fingerprint: salt-key ignores
 * every word that is not an option's value, and `-F` prints every fingerprint, the master's (`local`) among them.
 * Brine takes that word after `-F` alone; anywhere else a stray word is refused, where salt-key would ignore it
 * (`-d web1 web2` deletes web1 only there).
 */
function checkExtraArguments(extra: readonly string[], o: Record<string, unknown>): string | undefined {
  if (extra.length === 0) return undefined
  if (o.fingerAll === true && extra.length === 1) return undefined
  return `unexpected argument${extra.length > 1 ? 's' : ''}: ${extra.join(' ')} (globs go after their option: -a GLOB, -d GLOB, -f GLOB, …)`
}

/** Salt's range for `--keysize` (salt-key's process_keysize), kept so a script written for salt-key fails the same way. */
function checkKeysize(keysize: unknown): string | undefined {
  if (typeof keysize !== 'number') return undefined
  if (keysize < 2048) return 'The minimum value for keysize is 2048'
  if (keysize > 32768) return 'The maximum value for keysize is 32768'
  return undefined
}

/** `--gen-keys NAME`: a key pair written locally (no master), printed as Salt prints it: `return:` and the fingerprint. */
async function genKeys(action: { name: string; dir: string }, io: CommandIO, print: (data: unknown) => void): Promise<number> {
  try {
    // An existing pair is kept and reported, as Salt keeps a key another process made first.
    const { keys } = await loadOrCreateKeys(action.dir, action.name, { logger: silentLogger })
    print({ return: fingerprint(publicKeysOf(keys)) })
    return EXIT_OK
  } catch (error) {
    return fail(io, 'brine-key', (error as Error).message)
  }
}

/** `--accept-syndic GLOB`: the matching pending and accepted keys, confirmed as salt-key confirms an accept, marked as syndics'. */
async function acceptSyndic(
  match: string,
  args: KeyArgs,
  io: CommandIO,
  output: OutputSettings,
  wheel: (fun: string, extra?: Record<string, unknown>) => Promise<unknown>,
): Promise<number> {
  const matched = nameMatch(normalizeListing((await wheel('key.list_all')) as KeyListing), match)
  const selected: KeyListing = {}
  for (const dir of ['minions_pre', 'minions'] as const) if (matched[dir] !== undefined) selected[dir] = matched[dir]
  if (Object.keys(selected).length === 0) {
    io.stdout.write(`The key glob '${match}' does not match any unaccepted or accepted keys.\n`)
    return EXIT_OK
  }
  io.stdout.write('The following keys are going to be accepted as syndics:\n')
  io.stdout.write(renderOutput(output.out ?? 'key', selected, output))
  warnMixedScripts(selected, io)
  if (!args.yes) {
    if (io.prompt === undefined) return usageError(io, 'brine-key', 'refusing to accept syndic keys without a terminal to confirm on; use -y')
    const answer = (await io.prompt('Proceed? [n/Y] ')).trim().toLowerCase()
    if (!(answer === '' || answer.startsWith('y'))) return EXIT_OK
  }
  const result = (await wheel('key.accept_syndic', { match: Object.values(selected).flat() })) as { syndics?: string[] }
  for (const id of sortedIgnoreCase(result?.syndics ?? [])) io.stdout.write(`Key for syndic ${id} accepted.\n`)
  return EXIT_OK
}

/** salt-key's _filter_ret: delete takes every state; accept and reject the pending keys plus what --include-* adds. */
function statesChanged(kind: 'accept' | 'reject' | 'delete', args: KeyArgs): KeyDir[] {
  if (kind === 'delete') return [...KEY_DIRS]
  const from: KeyDir[] = ['minions_pre']
  if (args.includeAccepted) from.push('minions')
  if (args.includeRejected) from.push('minions_rejected')
  if (args.includeDenied) from.push('minions_denied')
  return from
}

/** The states an accept or reject looked in, as salt-key names them when nothing matched: "unaccepted, accepted or rejected". */
function statesNamed(args: KeyArgs): string {
  const states = ['unaccepted']
  if (args.includeAccepted) states.push('accepted')
  if (args.includeRejected) states.push('rejected')
  if (args.includeDenied) states.push('denied')
  return states.length === 1 ? states[0]! : `${states.slice(0, -1).join(', ')} or ${states.at(-1)}`
}

async function changeKeys(
  kind: 'accept' | 'reject' | 'delete',
  match: string,
  args: KeyArgs,
  io: CommandIO,
  output: OutputSettings,
  wheel: (fun: string, extra?: Record<string, unknown>) => Promise<unknown>,
): Promise<number> {
  const matched = nameMatch(normalizeListing((await wheel('key.list_all')) as KeyListing), match)
  const selected: KeyListing = {}
  for (const dir of statesChanged(kind, args)) if (matched[dir] !== undefined) selected[dir] = matched[dir]
  if (Object.keys(selected).length === 0) {
    io.stdout.write(`The key glob '${match}' does not match any ${statesNamed(args)} keys.\n`)
    return EXIT_OK
  }
  io.stdout.write(`The following keys are going to be ${PAST[kind]}:\n`)
  io.stdout.write(renderOutput(output.out ?? 'key', selected, output))
  warnMixedScripts(selected, io)
  if (!args.yes) {
    if (io.prompt === undefined) return usageError(io, 'brine-key', `refusing to ${kind} keys without a terminal to confirm on; use -y`)
    // Salt's defaults: yes for accept and reject, no for delete.
    const defaultYes = kind !== 'delete'
    const answer = (await io.prompt(defaultYes ? 'Proceed? [n/Y] ' : 'Proceed? [N/y] ')).trim().toLowerCase()
    if (!(answer === '' ? defaultYes : answer.startsWith('y'))) return EXIT_OK
  }
  const extra: Record<string, unknown> = { match: Object.values(selected).flat() }
  if (args.includeRejected) extra.include_rejected = true
  if (args.includeDenied) extra.include_denied = true
  if (args.includeAccepted) extra.include_accepted = true
  const result = (await wheel(`key.${kind}`, extra)) as KeyListing
  // Salt reports a delete from the listing it showed, and an accept or reject from what the master did.
  const done = kind === 'delete' ? selected : (result ?? {})
  for (const ids of Object.values(done)) for (const id of sortedIgnoreCase(ids ?? [])) io.stdout.write(`Key for minion ${id} ${PAST[kind]}.\n`)
  return EXIT_OK
}
