import { Option } from 'commander'
import type { Logger } from '@brine/core'
import { loadConfig, parseKwarg, yamlifyArg } from '@brine/config'
import { unwrapOutputter, type BusEvent } from '@brine/protocol'
import { MasterEvent, RunnerClient, type FollowedCallOptions, type MatchType, type RunEventSource, type RunnerResult } from '@brine/client'
import { jsonOutput } from '../output/json.js'
import { isOutputter, OUTPUTTERS, renderOutput, type OutputterName } from '../output/index.js'
import { cliLogger, EXIT_GENERIC, EXIT_OK, EXIT_USAGE, fail, type CommandIO } from '../io.js'
import { addCommonOptions, createProgram, integer, nonNegativeSeconds, parseArgv } from '../program.js'
import { describeClientError } from './client-error.js'
import { addOutFileOptions, openDocuments, readOutFileFlags, type OutFileFlags } from './output-file.js'

/** What `brine-run` needs of a RunnerClient (tests pass a stand-in). */
export interface RunnerLike {
  cmdFull(fun: string, arg?: readonly unknown[], kwarg?: Record<string, unknown>, options?: { signal?: AbortSignal }): Promise<RunnerResult>
  /** The same run, its progress events handed over as they fire (RunnerClient.cmdFollowed). */
  cmdFollowed?(
    fun: string,
    arg: readonly unknown[],
    kwarg: Record<string, unknown>,
    events: RunEventSource,
    options: FollowedCallOptions,
  ): Promise<RunnerResult>
  close(): Promise<void>
}

/** What `brine-run event.listen` needs of a MasterEvent. */
export interface EventSource {
  connect(): Promise<void>
  iter(options: { match?: string; matchType?: MatchType; signal?: AbortSignal }): AsyncIterable<BusEvent>
  close(): Promise<void>
}

export interface RunDeps {
  createRunner?: (options: { configDir: string; logger: Logger }) => RunnerLike
  createEvents?: (options: { configDir: string; logger: Logger }) => Promise<EventSource>
}

const MATCH_TYPES = ['startswith', 'prefix', 'endswith', 'find', 'regex', 'fnmatch', 'glob'] as const

export interface RunArgs {
  configDir: string
  logLevel: string
  fun: string
  arg: unknown[]
  kwarg: Record<string, unknown>
  out?: OutputterName
  outIndent?: number
  /** Seconds, when -t was given (Salt's unit: it becomes the runner's `timeout`). */
  timeout?: number
  matchType?: MatchType
  color?: boolean
  /** `--out-file`: where the return, the progress events and event.listen's lines go instead of stdout. */
  outFile?: OutFileFlags
}

/**
 * Salt's command-line arguments: `key=value` becomes a keyword argument typed by yamlify_arg;
 * other words stay positional strings. A number too large to hold exactly (a jid) stays a string.
 */
export function parseRunnerArguments(words: readonly string[]): { arg: unknown[]; kwarg: Record<string, unknown> } {
  const arg: unknown[] = []
  const kwarg: Record<string, unknown> = {}
  for (const word of words) {
    const pair = parseKwarg(word)
    if (pair === undefined) {
      arg.push(word)
      continue
    }
    const value = yamlifyArg(pair[1])
    kwarg[pair[0]] = typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value) ? pair[1] : value
  }
  return { arg, kwarg }
}

export function parseRunArgs(argv: readonly string[], io: CommandIO): RunArgs | number {
  const program = addCommonOptions(createProgram('brine-run', io))
    .description(
      "Run a master-side runner (Salt's `salt-run`): jobs.lookup_jid, jobs.list_jobs, jobs.active, jobs.print_job, manage.up, manage.down, manage.status, manage.versions; or event.listen to print the master's events.",
    )
    .argument('<function>', 'the runner, e.g. jobs.list_jobs, or event.listen')
    .argument('[arguments...]', 'its arguments; key=value ones are keyword arguments')
    .addOption(new Option('--out <outputter>', 'how to print the return (event.listen: json prints one JSON object per line)').choices(OUTPUTTERS))
    .option('--out-indent <n>', 'indent for json and yaml output (negative: one line)', integer)
    .option('-t, --timeout <seconds>', 'how long runners that ask minions wait for them (default: the config timeout)', nonNegativeSeconds)
    .addOption(new Option('--match-type <type>', 'event.listen: how the tag match applies (default glob, as state.event)').choices(MATCH_TYPES))
    .option('--no-color', 'never colour the output')
    .option('--force-color', 'colour the output even when it is not a terminal')
  addOutFileOptions(program)
  const code = parseArgv(program, argv)
  if (code !== undefined) return code
  const options = program.opts<Record<string, unknown>>()
  const [fun, rest] = program.processedArgs as [string, string[]]
  const outFile = readOutFileFlags(options)
  if (typeof outFile === 'string') {
    io.stderr.write(`brine-run: error: ${outFile}\n`)
    return EXIT_USAGE
  }
  if (!/^[A-Za-z_][\w]*\.[\w.]+$/.test(fun)) {
    io.stderr.write(`brine-run: error: '${fun}' is not a runner name (module.function, e.g. jobs.list_jobs)\n`)
    return EXIT_USAGE
  }
  const { arg, kwarg } = parseRunnerArguments(rest)
  const args: RunArgs = { configDir: String(options.configDir), logLevel: String(options.logLevel), fun, arg, kwarg }
  if (typeof options.out === 'string' && isOutputter(options.out)) args.out = options.out
  if (typeof options.outIndent === 'number') args.outIndent = options.outIndent
  if (typeof options.timeout === 'number') args.timeout = options.timeout
  if (typeof options.matchType === 'string') args.matchType = options.matchType as MatchType
  if (options.forceColor === true) args.color = true
  else if (options.color === false) args.color = false
  if (outFile !== undefined) args.outFile = outFile
  return args
}

/**
 * `brine-run <runner> [args] [key=value...]`: prints the runner's return with the outputter
 * (nested by default). Exit codes: 0 success, 1 the runner failed or the master could not be
 * reached or refused, 2 usage error.
 */
export async function runRun(argv: readonly string[], terminal: CommandIO, deps: RunDeps = {}): Promise<number> {
  const parsed = parseRunArgs(argv, terminal)
  if (typeof parsed === 'number') return parsed
  const args = parsed
  const file = openDocuments('brine-run', args.outFile, terminal)
  if (typeof file === 'number') return file
  // Everything brine-run prints is the outputter's: with --out-file it all goes there.
  const io: CommandIO = file === undefined ? terminal : { ...terminal, stdout: file }
  try {
    return await runWith(args, io, deps)
  } finally {
    file?.close()
  }
}

async function runWith(args: RunArgs, io: CommandIO, deps: RunDeps): Promise<number> {
  const logger = cliLogger(args.logLevel, io, 'brine-run')
  if (args.fun === 'event.listen') return listen(args, io, logger, deps)
  const color = args.color ?? io.stdout.isTTY === true
  const runner =
    deps.createRunner?.({ configDir: args.configDir, logger }) ?? new RunnerClient({ configDir: args.configDir, logger, origin: { client: 'cli' } })
  try {
    const result = await callRunner(runner, args, io, logger, deps)
    const { outputter, data } = unwrapOutputter(result.return)
    io.stdout.write(renderOutput(args.out ?? outputter ?? 'nested', data, { color, indent: args.outIndent }))
    return result.success ? EXIT_OK : EXIT_GENERIC
  } catch (error) {
    return fail(io, 'brine-run', describeClientError(error))
  } finally {
    await runner.close()
  }
}

/**
 * Runs the runner as salt-run does: followed on the master's bus, each progress event printed as it
 * fires (`{suffix: progress, event: data}` through the outputter, Salt's print_async_event), then the
 * return. Without a bus to follow (not on the master's machine) the runner runs without progress lines.
 */
async function callRunner(runner: RunnerLike, args: RunArgs, io: CommandIO, logger: Logger, deps: RunDeps): Promise<RunnerResult> {
  const kwarg = { ...args.kwarg }
  if (args.timeout !== undefined && kwarg['timeout'] === undefined) kwarg['timeout'] = args.timeout
  const options = io.signal === undefined ? {} : { signal: io.signal }
  const events = runner.cmdFollowed === undefined ? undefined : await openBus(args, logger, deps)
  if (events === undefined || runner.cmdFollowed === undefined) return runner.cmdFull(args.fun, args.arg, kwarg, options)
  const color = args.color ?? io.stdout.isTTY === true
  const onProgress = (data: Record<string, unknown>): void => {
    io.stdout.write(renderOutput(args.out ?? 'nested', { suffix: 'progress', event: data }, { color, indent: args.outIndent }))
  }
  try {
    return await runner.cmdFollowed(args.fun, args.arg, kwarg, events, { ...options, onProgress })
  } finally {
    await events.close()
  }
}

/** The master's event bus, connected; undefined (logged at debug) when it cannot be reached. */
async function openBus(args: RunArgs, logger: Logger, deps: RunDeps): Promise<EventSource | undefined> {
  let events: EventSource | undefined
  try {
    events =
      (await deps.createEvents?.({ configDir: args.configDir, logger })) ??
      new MasterEvent({ sockDir: (await loadConfig('master', { configDir: args.configDir, logger })).opts.sock_dir, logger })
    await events.connect()
    return events
  } catch (error) {
    logger.debug(`progress events will not show: ${(error as Error).message}`)
    await events?.close()
    return undefined
  }
}

/**
 * `brine-run event.listen [tagmatch] [count=N]`: Salt's `state.event` on the client side: every
 * event whose tag matches (glob by default, `*` when no tagmatch) as `<tag>\t<json data>` per
 * line, or with `--out json` one `{"tag", "data"}` object per line. Runs until Ctrl-C (exit 0) or
 * `count` events; a bus that cannot be reached is exit 1.
 */
async function listen(args: RunArgs, io: CommandIO, logger: Logger, deps: RunDeps): Promise<number> {
  const tagmatch = String(args.kwarg['tagmatch'] ?? args.arg[0] ?? '*')
  const countValue = args.kwarg['count'] ?? -1
  const count = typeof countValue === 'number' && Number.isInteger(countValue) ? countValue : Number.NaN
  if (Number.isNaN(count)) {
    io.stderr.write(`brine-run: error: count must be an integer, got '${String(countValue)}'\n`)
    return EXIT_USAGE
  }
  const matchType: MatchType = args.matchType ?? 'glob'
  let events: EventSource
  try {
    events =
      (await deps.createEvents?.({ configDir: args.configDir, logger })) ??
      new MasterEvent({ sockDir: (await loadConfig('master', { configDir: args.configDir, logger })).opts.sock_dir, logger })
  } catch (error) {
    return fail(io, 'brine-run', describeClientError(error))
  }
  const controller = new AbortController()
  const stop = (): void => controller.abort()
  io.signal?.addEventListener('abort', stop, { once: true })
  if (io.signal?.aborted === true) stop()
  try {
    const iterable = events.iter({ match: tagmatch, matchType, signal: controller.signal })
    await events.connect()
    logger.info(`listening for events matching ${JSON.stringify(tagmatch)} (${matchType})`)
    let seen = 0
    for await (const { tag, data } of iterable) {
      io.stdout.write(args.out === 'json' ? `${jsonOutput({ tag, data }, { indent: -1 })}\n` : `${tag}\t${jsonOutput(data, { indent: -1 })}\n`)
      if (count > 0 && ++seen >= count) break
    }
    return EXIT_OK
  } catch (error) {
    return fail(io, 'brine-run', describeClientError(error))
  } finally {
    io.signal?.removeEventListener('abort', stop)
    await events.close()
  }
}
