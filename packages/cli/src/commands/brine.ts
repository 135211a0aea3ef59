import { Option } from 'commander'
import { TimeoutError, type Logger } from '@brine/transport'
import { loadConfig, parseInput, secondsToMs, type MasterConfig, type TargetType, type Tgt } from '@brine/common'
import { LocalClient, NO_RESPONSE, type BatchEvent, type BatchJob, type BatchOptions, type ClientCredentials, type RunJobOptions, type WaitOptions } from '@brine/client'
import { LiveLine } from '../live-line.js'
import { addBatchOptions, jobBanner, planBatch, readBatchFlags, runBatchMode, type BatchFlags } from './brine-batch.js'
import { addEauthOptions, eauthArgs, resolveCredentials, type EauthArgs } from './eauth.js'
import { isOutputter, outputSettings, OUTPUTTERS, renderOutput, type OutputterName } from '../output/index.js'
import {
  addCommonOptions,
  cliLogger,
  createProgram,
  EXIT_GENERIC,
  EXIT_NO_MINIONS,
  EXIT_OK,
  EXIT_USAGE,
  usageError,
  fail,
  integer,
  nonNegativeSeconds,
  parseArgv,
  type CommandIO,
} from '../io.js'

/** A published job as `brine` reads it: @brine/client's Job (the shape batch mode reads too). */
export type CliJob = BatchJob

/** What `brine` needs of a LocalClient (tests pass a stand-in). */
export interface JobClient {
  /** Publishes with a reader of the job's returns already open (LocalClient's `runJob` with `listen: true`). */
  runJob(tgt: Tgt, fun: string, arg?: readonly unknown[], options?: RunJobOptions): Promise<CliJob>
  cmdAsync(tgt: Tgt, fun: string, arg?: readonly unknown[], options?: RunJobOptions): Promise<string>
  /** Batch mode (LocalClient's `cmdBatch`). */
  cmdBatch(tgt: Tgt, fun: string, arg: readonly unknown[], options: BatchOptions): AsyncIterable<BatchEvent>
  /** The master config's keys `brine` reads (batch_safe_limit, batch_safe_size). */
  config(): Promise<Pick<MasterConfig, 'batch_safe_limit' | 'batch_safe_size'>>
  close(): Promise<void>
}

/** A LocalClient as `brine` uses it: each job's reader opened before its publish (no job-cache lookup on the way). */
function localJobClient(options: { logger: Logger; opts: MasterConfig; credentials?: ClientCredentials }): JobClient {
  const client = new LocalClient({ ...options, origin: { client: 'cli' } })
  return {
    runJob: (tgt, fun, arg, jobOptions) => client.runJob(tgt, fun, arg, { ...jobOptions, listen: true }),
    cmdAsync: (tgt, fun, arg, jobOptions) => client.cmdAsync(tgt, fun, arg, jobOptions),
    cmdBatch: (tgt, fun, arg, batchOptions) => client.cmdBatch(tgt, fun, arg, batchOptions),
    config: () => client.config(),
    close: () => client.close(),
  }
}

export interface BrineDeps {
  createClient?: (options: { configDir: string; logger: Logger; opts: MasterConfig; credentials?: ClientCredentials }) => JobClient
}

/** Salt's target flags and the tgt_type each selects. */
const TARGET_FLAGS: ReadonlyArray<[flag: string, key: string, type: TargetType, help: string]> = [
  ['-E, --pcre', 'pcre', 'pcre', 'the target is a regular expression on minion ids'],
  ['-G, --grain', 'grain', 'grain', "the target is a grain match, 'key:glob'"],
  ['-P, --grain-pcre', 'grainPcre', 'grain_pcre', "the target is a grain match, 'key:regex'"],
  ['-L, --list', 'list', 'list', 'the target is a comma-separated list of minion ids'],
  ['-C, --compound', 'compound', 'compound', 'the target is a compound expression'],
  ['-N, --nodegroup', 'nodegroup', 'nodegroup', 'the target is a nodegroup name from the master config'],
  ['-S, --ipcidr', 'ipcidr', 'ipcidr', 'the target is an IP address or CIDR subnet'],
]

export interface BrineArgs {
  configDir: string
  logLevel: string
  tgt: Tgt
  tgtType: TargetType
  fun: string
  /** The words after the function, typed as Salt's CLI types them (parse_input): keyword arguments ride in a `__kwarg__` dict. */
  arg: unknown[]
  /** ms, when -t was given. */
  timeout?: number
  out?: OutputterName
  outIndent?: number
  static: boolean
  async: boolean
  showJid: boolean
  verbose: boolean
  hideTimeout: boolean
  ret?: string
  color?: boolean
  batch: BatchFlags
  /** `-a/--auth`, `-T/--make-token`, `--username`, `--password`. */
  auth: EauthArgs
}

/** Parses `brine`'s argv; returns the arguments, or an exit code when parsing ended the run. */
export function parseBrineArgs(argv: readonly string[], io: CommandIO): BrineArgs | number {
  const program = addCommonOptions(createProgram('brine', io))
    .description("Run a function on the minions matched by a target (Salt's `salt`).")
    .argument('<target>', 'which minions (a glob on ids unless a target flag says otherwise)')
    .argument('<function>', 'the execution module function, e.g. test.ping')
    .argument('[arguments...]', "its arguments, typed as Salt types them (1, 2.5, True, None, '[1, 2]', '{a: 1}'); key=value ones are keyword arguments")
    .option('-t, --timeout <seconds>', 'seconds to wait for returns before asking the minions (find_job)', nonNegativeSeconds)
  for (const [flag, , , help] of TARGET_FLAGS) program.option(flag, help)
  program
    .addOption(new Option('--out <outputter>', 'how to print the returns').choices(OUTPUTTERS))
    .option('--out-indent <n>', 'indent for json and yaml output (negative: one line)', integer)
    .option('--static', 'print one document with every return at the end')
    .option('--async', 'publish and print the job id without waiting')
    .option('--show-jid', 'print the job id first')
    .option('-v, --verbose', 'print the job id banner and every minion that did not return')
    .option('--hide-timeout', 'do not report minions that did not return')
    .option('--return <returners>', 'returners that also receive the returns')
    .option('--no-parse <argnames>', 'comma-separated keyword arguments (argname=value) whose values stay strings')
    .option('--no-color', 'never colour the output')
    .option('--force-color', 'colour the output even when it is not a terminal')
  addBatchOptions(program)
  addEauthOptions(program)
  const code = parseArgv(program, argv)
  if (code !== undefined) return code
  const options = program.opts<Record<string, unknown>>()
  const [target, fun, rest] = program.processedArgs as [string, string, string[]]
  const chosen = TARGET_FLAGS.filter(([, key]) => options[key] === true)
  if (chosen.length > 1) {
    return usageError(io, 'brine', `give at most one target type; got ${chosen.map(([flag]) => flag.split(',')[0]).join(', ')}`, program.usage())
  }
  const tgtType: TargetType = chosen[0]?.[2] ?? 'glob'
  // Salt splits a list target on commas before publishing.
  const tgt: Tgt = tgtType === 'list' ? target.split(',').map((id) => id.trim()).filter((id) => id !== '') : target
  if (fun === '' || !/^[A-Za-z_][\w.]*$/.test(fun)) {
    return usageError(io, 'brine', `'${fun}' is not a function name (module.function, e.g. test.ping)`, program.usage())
  }
  const batch = readBatchFlags(options, io)
  if (typeof batch === 'number') return batch
  let auth: EauthArgs
  try {
    auth = eauthArgs(options)
  } catch (error) {
    return usageError(io, 'brine', (error as Error).message, program.usage())
  }
  const args: BrineArgs = {
    auth,
    configDir: options.configDir as string,
    logLevel: options.logLevel as string,
    tgt,
    tgtType,
    fun,
    arg: parseInput(rest, { noParse: noParseNames(options.parse) }),
    static: options.static === true,
    async: options.async === true,
    showJid: options.showJid === true,
    verbose: options.verbose === true,
    hideTimeout: options.hideTimeout === true,
    batch,
  }
  if (options.timeout !== undefined) args.timeout = secondsToMs(options.timeout, '--timeout')
  if (typeof options.out === 'string' && isOutputter(options.out)) args.out = options.out
  if (typeof options.outIndent === 'number') args.outIndent = options.outIndent
  if (typeof options.return === 'string') args.ret = options.return
  if (options.forceColor === true) args.color = true
  else if (options.color === false) args.color = false
  return args
}

/** Salt's `--no-parse a,b`; commander stores a `--no-*` option with a value under the positive name. */
export function noParseNames(value: unknown): string[] {
  return typeof value === 'string' ? value.split(',').map((name) => name.trim()).filter((name) => name !== '') : []
}

/** `brine <target> <function> [arguments...]`: returns the exit code (Salt's: 0, 1 a minion failed or did not return, 2 nothing matched). */
export async function runBrine(argv: readonly string[], io: CommandIO, deps: BrineDeps = {}): Promise<number> {
  const parsed = parseBrineArgs(argv, io)
  if (typeof parsed === 'number') return parsed
  const args = parsed
  const logger = cliLogger(args.logLevel, io, 'brine')
  // The master config is read once: the client connects with it and the output keys (output, output_indent, color) come from it.
  let opts: MasterConfig
  try {
    opts = (await loadConfig('master', { configDir: args.configDir, logger })).opts
  } catch (error) {
    return fail(io, 'brine', describeClientError(error))
  }
  // -a: the eauth user's credentials (or a token made with -T); else the root key, or the saved token.
  let credentials: ClientCredentials | undefined
  try {
    // A stand-in client (tests) needs no credentials unless -a asked for them.
    if (args.auth.eauth !== undefined || deps.createClient === undefined) credentials = await resolveCredentials(args.auth, args.configDir, io, logger, opts)
  } catch (error) {
    return fail(io, 'brine', describeClientError(error), (error as Error).name === 'UsageError' ? EXIT_USAGE : EXIT_GENERIC)
  }
  const clientOptions = { configDir: args.configDir, logger, opts, ...(credentials === undefined ? {} : { credentials }) }
  const client = deps.createClient?.(clientOptions) ?? localJobClient(clientOptions)
  const output = outputSettings(opts, args, io.stdout.isTTY === true)
  const display = { color: output.color, indent: output.indent, stripColors: output.stripColors }
  const jobOptions: RunJobOptions = { tgtType: args.tgtType }
  if (args.timeout !== undefined) jobOptions.timeout = args.timeout
  if (args.ret !== undefined) jobOptions.ret = args.ret
  if (io.signal !== undefined) jobOptions.signal = io.signal
  const noMinions = (): number => {
    io.stderr.write('No minions matched the target. No command was sent, no jid was assigned.\n')
    return EXIT_NO_MINIONS
  }
  try {
    const plan = await planBatch(client, args, io)
    if (plan !== undefined) return await runBatchMode(client, args, io, plan, { out: output.out, display })
    if (args.async) {
      const jid = await client.cmdAsync(args.tgt, args.fun, args.arg, jobOptions)
      if (jid === '') return noMinions()
      io.stdout.write(`Executed command with job ID: ${jid}\n`)
      return EXIT_OK
    }
    const job = await client.runJob(args.tgt, args.fun, args.arg, jobOptions)
    const { jid, minions } = job
    if (minions.length === 0 && Object.keys(job.syndics ?? {}).length === 0) {
      await job.close()
      return noMinions()
    }
    if (args.showJid) io.stdout.write(`jid: ${jid}\n`)
    if (args.verbose) io.stdout.write(jobBanner(jid))
    // A live "returns 2/3" on a terminal's stderr.
    const live = new LiveLine(io, 'returns {value}/{total}', { enabled: !args.static && io.stderr.isTTY === true })
    // Behind syndics the total is what they announced before; their announcements may add to it.
    live.start(minions.length + Object.values(job.syndics ?? {}).reduce((sum, candidates) => sum + candidates.length, 0))
    const collected: Record<string, unknown> = {}
    let failed = false
    let received = 0
    let shown = 0
    const waitOptions: WaitOptions = {}
    if (args.timeout !== undefined) waitOptions.timeout = args.timeout
    if (io.signal !== undefined) waitOptions.signal = io.signal
    const returned = new Set<string>()
    const noReturn = (id: string): void => {
      if (args.hideTimeout) return
      failed = true
      if (args.static) collected[id] = NO_RESPONSE
      else {
        const text = output.out === undefined || output.out === 'nested' ? renderOutput('no_return', { [id]: NO_RESPONSE }, display) : renderOutput(output.out, { [id]: NO_RESPONSE }, display)
        live.write(text, ++shown)
      }
    }
    try {
      for await (const item of job.returns(waitOptions)) {
        if (item.status === 'missing') {
          noReturn(item.id)
          continue
        }
        returned.add(item.id)
        received++
        if (item.retcode !== 0 || item.success === false) failed = true
        if (args.static) {
          collected[item.id] = item.ret
          continue
        }
        // The minion's outputter hint applies only when neither --out nor the config's `output` chose one, as in Salt.
        const text = renderOutput(output.out ?? item.out ?? 'nested', { [item.id]: item.ret }, { ...display, retcode: item.retcode })
        live.write(text, ++shown)
      }
      // Salt reports a listed id that is not an accepted minion as not returning (unless it returned after all,
      // through a syndic): it fails the command as a silent minion does.
      for (const id of job.missing ?? []) if (!returned.has(id)) noReturn(id)
    } finally {
      live.stop()
      await job.close()
    }
    if (io.signal?.aborted === true) {
      io.stderr.write(
        `Exiting gracefully on Ctrl-c\nThis job's jid is: ${jid}\nThe minions may not have all finished running and any remaining minions will return upon completion.\n`,
      )
      return EXIT_GENERIC
    }
    if (args.static && Object.keys(collected).length > 0) io.stdout.write(renderOutput(output.out ?? 'nested', collected, display))
    if (received === 0 && !failed) {
      io.stderr.write('ERROR: No return received\n')
      return EXIT_NO_MINIONS
    }
    if (failed) {
      io.stderr.write('ERROR: Minions returned with non-zero exit code\n')
      return EXIT_GENERIC
    }
    return EXIT_OK
  } catch (error) {
    return fail(io, 'brine', describeClientError(error))
  } finally {
    await client.close()
  }
}

/** Turns a client failure into one line an operator can act on. */
export function describeClientError(error: unknown): string {
  if (error instanceof TimeoutError) return `${error.message}; is brine-master running, and is this its config (-c)?`
  return error instanceof Error ? error.message : String(error)
}
