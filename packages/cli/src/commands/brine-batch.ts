import { NO_RESPONSE, parseBatchSize, type BatchEvent, type BatchJob, type BatchOptions, type CliReturn, type RunJobOptions } from '@brine/client'
import { LiveLine } from '../live-line.js'
import { pythonRepr, renderOutput, type DisplayOptions } from '../output/index.js'
import { EXIT_GENERIC, EXIT_NO_MINIONS, EXIT_OK, type CommandIO, type OutputStream } from '../io.js'
import type { BrineArgs } from './brine-args.js'
import type { JobClient } from './job-client.js'

/** How a run goes in batch mode: the size, and the ping already published when batch_safe_limit chose it. */
export interface BatchPlan {
  size: string
  ping?: BatchJob
}

/**
 * Whether this run goes in batch mode: `-b` says so; otherwise, as Salt's CLI does, when
 * `batch_safe_limit` (flag, else master config) is above 1 and the target matches at least that many
 * minions, batches of `batch_safe_size` with Salt's NOTICE. The target is sized by publishing the ping
 * that batch mode starts with (Salt previews it without a publish); below the limit that ping is left
 * unread and the run goes on as usual.
 */
export async function planBatch(client: JobClient, args: BrineArgs, io: CommandIO): Promise<BatchPlan | undefined> {
  const flags = args.batch
  if (flags.size !== undefined) return { size: flags.size }
  const config = flags.safeLimit === undefined || flags.safeSize === undefined ? await client.config() : undefined
  const limit = flags.safeLimit ?? config?.batch_safe_limit ?? 0
  if (limit <= 1) return undefined
  const size = flags.safeSize ?? String(config?.batch_safe_size ?? 8)
  parseBatchSize(size, 'batch_safe_size')
  const pingOptions: RunJobOptions = { tgtType: args.tgtType }
  if (args.timeout !== undefined) pingOptions.timeout = args.timeout
  if (io.signal !== undefined) pingOptions.signal = io.signal
  const ping = await client.runJob(args.tgt, 'test.ping', [], pingOptions)
  if (ping.minions.length < limit) {
    await ping.close()
    return undefined
  }
  // Salt's NOTICE, on stdout; with --static on stderr, so stdout stays one document.
  const notice = args.static ? io.stderr : io.stdout
  notice.write('\nNOTICE: Too many minions targeted, switching to batch execution.\n')
  return { size, ping }
}

/** Salt's banner for `-v`, one per job. */
export function jobBanner(jid: string): string {
  return `Executing job with jid ${jid}\n-------------------------------------------\n\n`
}

/** The exit code a minion's outcome asks for: its retcode, 255 above that (an exit status wraps at 256), 1 for any other failure. */
function exitCodeOf(item: CliReturn): number {
  if (item.status === 'missing') return EXIT_GENERIC
  if (item.retcode > 255) return 255
  if (item.retcode >= 1) return item.retcode
  return item.retcode !== 0 || item.success === false ? EXIT_GENERIC : EXIT_OK
}

/** How returns are shown: the outputter `--out` (or the config) chose, the display options, and where the documents go. */
export interface BatchView {
  out?: string | undefined
  display: DisplayOptions
  /** stdout, or the `--out-file`: the outputter's documents only (announcements, banners and summaries stay on stdout). */
  documents: OutputStream
}

type EventOf<T extends BatchEvent['type']> = Extract<BatchEvent, { type: T }>

/** Shows a batch run's events as Salt's batch output does, and keeps what its exit code is made of. */
class BatchDisplay {
  readonly #args: BrineArgs
  readonly #io: CommandIO
  readonly #view: BatchView
  readonly #live: LiveLine
  /** With --static: every outcome, printed as one document at the end. */
  readonly #collected: Record<string, unknown> = {}
  readonly #jids: string[] = []
  #matched = true
  #code = EXIT_OK
  #failedRetcode = false
  /** The last minion's outcome: what a failhard stop names. */
  #last: CliReturn | undefined

  constructor(args: BrineArgs, io: CommandIO, view: BatchView) {
    this.#args = args
    this.#io = io
    this.#view = view
    this.#live = new LiveLine(io, '{bar} {value}/{total} done, {running} running, {waiting} waiting')
  }

  show(event: BatchEvent): void {
    switch (event.type) {
      case 'ping':
        return this.#ping(event)
      case 'batch':
        return this.#batch(event)
      case 'return':
        return this.#return(event)
      case 'failhard':
        return this.#failhard(event)
    }
  }

  stop(): void {
    this.#live.stop()
  }

  /** After the last event: Salt's closing lines, and the exit code. */
  finish(): number {
    const io = this.#io
    if (!this.#matched) {
      io.stderr.write('No minions matched the target.\n')
      return EXIT_NO_MINIONS
    }
    if (io.signal?.aborted === true) {
      io.stderr.write(
        `Exiting gracefully on Ctrl-c\nThis batch's jids are: ${this.#jids.join(', ') || '(none yet)'}\nThe minions may not have all finished running and any remaining minions will return upon completion.\n`,
      )
      return EXIT_GENERIC
    }
    if (this.#args.static && Object.keys(this.#collected).length > 0)
      this.#view.documents.write(renderOutput(this.#view.out ?? 'nested', this.#collected, this.#view.display))
    if (this.#failedRetcode) io.stderr.write('ERROR: Minions returned with non-zero exit code\n')
    return this.#code
  }

  /** An announcement (stdout), or with `document` one of the outputter's documents (stdout or the --out-file). */
  #print(text: string, document = false): void {
    if (!this.#args.static) this.#live.write(text, { to: document ? this.#view.documents : this.#io.stdout })
  }

  #note(event: Extract<BatchEvent, { progress: unknown }>): void {
    this.#live.set(event.progress.done, { running: event.progress.running, waiting: event.progress.waiting })
  }

  #ping(event: EventOf<'ping'>): void {
    this.#matched = event.minions.length > 0
    if (!this.#args.hideTimeout) {
      for (const id of event.down) {
        this.#code = Math.max(this.#code, EXIT_GENERIC)
        if (this.#args.static) this.#collected[id] = NO_RESPONSE
        this.#print(`Minion ${id} did not respond. No job will be sent.\n`)
      }
    }
    if (event.up.length > 0) this.#live.start(event.up.length, 0, { running: 0, waiting: event.up.length })
  }

  #batch(event: EventOf<'batch'>): void {
    this.#jids.push(event.jid)
    this.#print(`\nExecuting run on ${pythonRepr(event.minions)}\n\n`)
    if (this.#args.showJid) this.#print(`jid: ${event.jid}\n`)
    if (this.#args.verbose) this.#print(jobBanner(event.jid))
    this.#note(event)
  }

  #return(event: EventOf<'return'>): void {
    const { item } = event
    this.#last = item
    this.#note(event)
    if (item.status === 'missing' && this.#args.hideTimeout) return
    this.#code = Math.max(this.#code, exitCodeOf(item))
    if (item.status === 'returned' && exitCodeOf(item) !== EXIT_OK) this.#failedRetcode = true
    if (this.#args.static) this.#collected[item.id] = item.status === 'returned' ? item.ret : NO_RESPONSE
    else this.#print(this.#returnText(item), true)
  }

  #returnText(item: CliReturn): string {
    const { out, display } = this.#view
    if (item.status === 'missing') {
      return out === undefined || out === 'nested'
        ? renderOutput('no_return', { [item.id]: NO_RESPONSE }, display)
        : renderOutput(out, { jid: item.jid, [item.id]: NO_RESPONSE }, display)
    }
    // Salt's batch document: the return under the minion's id, with the job's retcode and jid beside it.
    return renderOutput(out ?? item.out ?? 'nested', { retcode: item.retcode, jid: item.jid, [item.id]: item.ret }, display)
  }

  #failhard(event: EventOf<'failhard'>): void {
    this.#live.stop()
    const what = this.#last?.status === 'missing' ? 'did not return' : 'returned with non-zero exit code'
    let text = `ERROR: Minion ${event.id} ${what}. Batch run stopped due to failhard`
    if (event.unsent.length > 0) text += `; not sent to ${pythonRepr(event.unsent)}`
    if (event.running.length > 0) text += `; still running on ${pythonRepr(event.running)}`
    this.#io.stderr.write(`${text}\n`)
  }
}

/** The client's batch options from `brine`'s flags and the plan. */
function batchOptions(args: BrineArgs, io: CommandIO, plan: BatchPlan): BatchOptions {
  const options: BatchOptions = { tgtType: args.tgtType, batch: plan.size, failhard: args.batch.failhard }
  if (args.timeout !== undefined) options.timeout = args.timeout
  if (args.ret !== undefined) options.ret = args.ret
  if (args.metadata !== undefined) options.metadata = args.metadata
  if (args.batch.wait !== undefined) options.batchWait = args.batch.wait
  if (plan.ping !== undefined) options.ping = plan.ping
  if (io.signal !== undefined) options.signal = io.signal
  return options
}

/**
 * `brine -b …`: Salt's batch output, through {@link JobClient.cmdBatch}. Minions that did not answer
 * the ping are named ("did not respond. No job will be sent."), each batch is announced ("Executing run
 * on [...]"), each return is shown with its `jid` and `retcode` (in every outputter, as Salt's batch
 * does), and a live line on a terminal's stderr counts done / running / waiting minions. `--static`
 * prints one document at the end, without the announcements. Exit: the highest retcode; at least 1 when
 * a minion did not answer or return (unless `--hide-timeout`), where Salt says 0; 2 when nothing matched.
 */
export async function runBatchMode(client: JobClient, args: BrineArgs, io: CommandIO, plan: BatchPlan, view: BatchView): Promise<number> {
  const display = new BatchDisplay(args, io, view)
  try {
    for await (const event of client.cmdBatch(args.tgt, args.fun, args.arg, batchOptions(args, io, plan))) display.show(event)
  } finally {
    display.stop()
  }
  return display.finish()
}
