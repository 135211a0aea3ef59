import type { Logger } from '@brine/core'
import { loadConfig, type MasterConfig } from '@brine/config'
import { NO_RESPONSE, type CliReturn, type RunJobOptions, type WaitOptions } from '@brine/client'
import { LiveLine } from '../live-line.js'
import { parseCacheOption } from '../parse-cache.js'
import { parseBrineArgs, type BrineArgs } from './brine-args.js'
import { jobBanner, planBatch, runBatchMode, type BatchView } from './brine-batch.js'
import { describeClientError } from './client-error.js'
import { resolveCredentials, type ResolvedCredentials } from './eauth.js'
import { localJobClient, type CliJob, type JobClient, type JobClientOptions } from './job-client.js'
import { formatDocs } from './docs.js'
import { openDocuments } from './output-file.js'
import { returnsSummary } from './summary.js'
import { outputSettings, renderOutput } from '../output/index.js'
import { cliLogger, EXIT_GENERIC, EXIT_NO_MINIONS, EXIT_OK, EXIT_USAGE, fail, type CommandIO } from '../io.js'

export { noParseNames, parseBrineArgs, type BrineArgs } from './brine-args.js'
export { describeClientError } from './client-error.js'
export type { CliJob, JobClient, JobClientOptions } from './job-client.js'

export interface BrineDeps {
  createClient?: (options: JobClientOptions) => JobClient
}

/**
 * The master config and the credentials, each read once for the whole run: the client connects with
 * them, and the output keys (output, output_indent, color) come from the same config. An exit code when
 * either cannot be had.
 */
async function resolveClientOptions(args: BrineArgs, io: CommandIO, logger: Logger, deps: BrineDeps): Promise<JobClientOptions | number> {
  let opts: MasterConfig
  try {
    opts = (await loadConfig('master', { configDir: args.configDir, logger, ...parseCacheOption(io) })).opts
  } catch (error) {
    return fail(io, 'brine', describeClientError(error))
  }
  // -a: the eauth user's credentials (or a token made with -T); else the root key, or the saved token.
  let resolved: ResolvedCredentials | undefined
  try {
    // A stand-in client (tests) needs no credentials unless -a asked for them.
    if (args.auth.eauth !== undefined || deps.createClient === undefined) resolved = await resolveCredentials(args.auth, opts, io, logger)
  } catch (error) {
    return fail(io, 'brine', describeClientError(error), (error as Error).name === 'UsageError' ? EXIT_USAGE : EXIT_GENERIC)
  }
  return { configDir: args.configDir, logger, opts, ...resolved }
}

/** The publish options `brine`'s flags ask for. */
function jobOptionsOf(args: BrineArgs, io: CommandIO): RunJobOptions {
  const options: RunJobOptions = { tgtType: args.tgtType }
  if (args.timeout !== undefined) options.timeout = args.timeout
  if (args.ret !== undefined) options.ret = args.ret
  if (args.metadata !== undefined) options.metadata = args.metadata
  if (io.signal !== undefined) options.signal = io.signal
  return options
}

function noMinions(io: CommandIO): number {
  io.stderr.write('No minions matched the target. No command was sent, no jid was assigned.\n')
  return EXIT_NO_MINIONS
}

/** `brine --async`: publish and print the jid. */
async function publishAsync(client: JobClient, args: BrineArgs, io: CommandIO): Promise<number> {
  const jid = await client.cmdAsync(args.tgt, args.fun, args.arg, jobOptionsOf(args, io))
  if (jid === '') return noMinions(io)
  io.stdout.write(`Executed command with job ID: ${jid}\n`)
  return EXIT_OK
}

/** Shows one job's returns as they arrive (or all at the end with --static), and keeps what the exit code is made of. */
class ReturnsDisplay {
  readonly #args: BrineArgs
  readonly #io: CommandIO
  readonly #view: BatchView
  readonly #live: LiveLine
  readonly #collected: Record<string, unknown> = {}
  readonly #returned = new Set<string>()
  /** Minions that did not return, and returned minions that failed: what the summary names. */
  readonly #missing: string[] = []
  readonly #failures: string[] = []
  readonly #summary: boolean
  /** `sys.doc`: the docstrings are printed once each after every return, as Salt's CLI does. */
  readonly #docs: boolean
  #failed = false
  #shown = 0

  constructor(args: BrineArgs, io: CommandIO, view: BatchView, summary: boolean) {
    this.#args = args
    this.#io = io
    this.#view = view
    // Salt prints it only when --out was not given, and --static takes its batch path, which has none.
    this.#summary = summary && args.out === undefined && !args.static
    this.#docs = args.fun === 'sys.doc' && !args.static
    // A live "returns 2/3" on a terminal's stderr.
    this.#live = new LiveLine(io, 'returns {value}/{total}', { enabled: !args.static && io.stderr.isTTY === true })
  }

  /** Reads the job's returns until it is done, the wait ends or the signal aborts. */
  async follow(job: CliJob): Promise<void> {
    // Behind syndics the total is what they announced before; their announcements may add to it.
    this.#live.start(job.minions.length + Object.values(job.syndics ?? {}).reduce((sum, candidates) => sum + candidates.length, 0))
    const waitOptions: WaitOptions = {}
    if (this.#args.timeout !== undefined) waitOptions.timeout = this.#args.timeout
    if (this.#io.signal !== undefined) waitOptions.signal = this.#io.signal
    try {
      for await (const item of job.returns(waitOptions)) {
        if (item.status === 'missing') this.#noReturn(item.id)
        else this.#show(item)
      }
      // Salt reports a listed id that is not an accepted minion as not returning (unless it returned after all,
      // through a syndic): it fails the command as a silent minion does.
      for (const id of job.missing ?? []) if (!this.#returned.has(id)) this.#noReturn(id)
    } finally {
      this.#live.stop()
    }
  }

  /** After the last return: the --static document, the summary, Salt's closing lines, and the exit code. */
  finish(jid: string): number {
    const io = this.#io
    if (io.signal?.aborted === true) {
      io.stderr.write(
        `Exiting gracefully on Ctrl-c\nThis job's jid is: ${jid}\nThe minions may not have all finished running and any remaining minions will return upon completion.\n`,
      )
      return EXIT_GENERIC
    }
    if (this.#docs) return this.#finishDocs()
    const { out, display } = this.#view
    if (this.#args.static && Object.keys(this.#collected).length > 0) this.#view.documents.write(renderOutput(out ?? 'nested', this.#collected, display))
    if (this.#summary) {
      const counts = { returned: this.#returned.size, missing: this.#missing, failures: this.#failures }
      io.stdout.write(returnsSummary(counts, this.#args.verbose))
    }
    if (this.#returned.size === 0 && !this.#failed) {
      io.stderr.write('ERROR: No return received\n')
      return EXIT_NO_MINIONS
    }
    if (this.#failed) {
      io.stderr.write('ERROR: Minions returned with non-zero exit code\n')
      return EXIT_GENERIC
    }
    return EXIT_OK
  }

  #show(item: Extract<CliReturn, { status: 'returned' }>): void {
    this.#returned.add(item.id)
    if (item.retcode !== 0 || item.success === false) {
      this.#failed = true
      this.#failures.push(item.id)
    }
    if (this.#args.static || this.#docs) {
      this.#collected[item.id] = item.ret
      return
    }
    // The minion's outputter hint applies only when neither --out nor the config's `output` chose one, as in Salt.
    const { out, display } = this.#view
    const text = renderOutput(out ?? item.out ?? 'nested', { [item.id]: item.ret }, { ...display, retcode: item.retcode })
    this.#live.write(text, { value: ++this.#shown, to: this.#view.documents })
  }

  /** sys.doc's end: the docstrings, or Salt's message and exit 2 when no minion gave any. */
  #finishDocs(): number {
    const text = formatDocs(this.#collected, this.#args.out !== undefined, this.#view.display)
    if (text === '') {
      this.#io.stderr.write('No minions found to gather docs from\n')
      return EXIT_NO_MINIONS
    }
    this.#view.documents.write(text)
    return this.#failed ? EXIT_GENERIC : EXIT_OK
  }

  #noReturn(id: string): void {
    if (this.#args.hideTimeout) return
    this.#failed = true
    this.#missing.push(id)
    if (this.#args.static) {
      this.#collected[id] = NO_RESPONSE
      return
    }
    const { out, display } = this.#view
    const text =
      out === undefined || out === 'nested' ? renderOutput('no_return', { [id]: NO_RESPONSE }, display) : renderOutput(out, { [id]: NO_RESPONSE }, display)
    this.#live.write(text, { value: ++this.#shown, to: this.#view.documents })
  }
}

/** Publishes the job and shows its returns. */
async function runJob(client: JobClient, args: BrineArgs, io: CommandIO, view: BatchView, summary: boolean): Promise<number> {
  const job = await client.runJob(args.tgt, args.fun, args.arg, jobOptionsOf(args, io))
  if (job.minions.length === 0 && Object.keys(job.syndics ?? {}).length === 0) {
    await job.close()
    return noMinions(io)
  }
  if (args.showJid) io.stdout.write(`jid: ${job.jid}\n`)
  if (args.verbose) io.stdout.write(jobBanner(job.jid))
  const display = new ReturnsDisplay(args, io, view, summary)
  try {
    await display.follow(job)
  } finally {
    await job.close()
  }
  return display.finish(job.jid)
}

/**
 * `--subset`: the same run on the minions picked (a list target), found by asking the target's minions
 * for `sys.list_functions` first; undefined when none of them has the function.
 */
async function narrowToSubset(client: JobClient, args: BrineArgs, io: CommandIO, count: number): Promise<BrineArgs | undefined> {
  const options: RunJobOptions = { tgtType: args.tgtType }
  if (args.timeout !== undefined) options.timeout = args.timeout
  if (io.signal !== undefined) options.signal = io.signal
  const ids = await client.subsetOf(args.tgt, args.fun, count, options)
  return ids.length === 0 ? undefined : { ...args, tgt: ids, tgtType: 'list' }
}

/** `--preview-target`: the minions the master resolves the target to, through the outputter (Salt's nested list by default); exit 0. */
async function previewTarget(client: JobClient, args: BrineArgs, io: CommandIO, view: BatchView): Promise<number> {
  const options: RunJobOptions = { tgtType: args.tgtType }
  if (io.signal !== undefined) options.signal = io.signal
  const minions = await client.previewTarget(args.tgt, args.fun, options)
  view.documents.write(renderOutput(view.out ?? 'nested', minions, view.display))
  return EXIT_OK
}

/** Runs the job the way the flags ask: a preview of the target only, a subset first, then batch mode, --async, or one job. */
async function dispatch(client: JobClient, args: BrineArgs, io: CommandIO, view: BatchView, summary: boolean): Promise<number> {
  if (args.previewTarget) return await previewTarget(client, args, io, view)
  if (args.subset !== undefined) {
    const picked = await narrowToSubset(client, args, io, args.subset)
    if (picked === undefined) return noMinions(io)
    args = picked
  }
  const plan = await planBatch(client, args, io)
  if (plan !== undefined) return await runBatchMode(client, args, io, plan, view)
  if (args.async) return await publishAsync(client, args, io)
  return await runJob(client, args, io, view, summary)
}

/** `brine <target> <function> [arguments...]`: returns the exit code (Salt's: 0, 1 a minion failed or did not return, 2 nothing matched). */
export async function runBrine(argv: readonly string[], io: CommandIO, deps: BrineDeps = {}): Promise<number> {
  const args = parseBrineArgs(argv, io)
  if (typeof args === 'number') return args
  const logger = cliLogger(args.logLevel, io, 'brine')
  const clientOptions = await resolveClientOptions(args, io, logger, deps)
  if (typeof clientOptions === 'number') return clientOptions
  const file = openDocuments('brine', args.outFile, io)
  if (typeof file === 'number') return file
  const client = deps.createClient?.(clientOptions) ?? localJobClient(clientOptions)
  // A file gets no colour unless --force-color asks for it.
  const output = outputSettings(clientOptions.opts, args, file === undefined && io.stdout.isTTY === true)
  const display = { color: output.color, indent: output.indent, stripColors: output.stripColors }
  const view: BatchView = { out: output.out, display, documents: file ?? io.stdout }
  const summary = args.summary || clientOptions.opts.cli_summary === true
  try {
    return await dispatch(client, args, io, view, summary)
  } catch (error) {
    return fail(io, 'brine', describeClientError(error))
  } finally {
    file?.close()
    await client.close()
  }
}
