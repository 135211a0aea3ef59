import { InvalidArgumentError, type Command } from 'commander'
import { secondsToMs } from '@brine/common'
import { BatchSizeError, NO_RESPONSE, parseBatchSize, type BatchEvent, type BatchJob, type BatchOptions, type CliReturn, type RunJobOptions } from '@brine/client'
import { LiveLine } from '../live-line.js'
import { pythonRepr, renderOutput, type DisplayOptions, type OutputterName } from '../output/index.js'
import { EXIT_GENERIC, EXIT_NO_MINIONS, EXIT_OK, EXIT_USAGE, integer, nonNegativeSeconds, type CommandIO } from '../io.js'
import type { BrineArgs, JobClient } from './brine.js'

/** `brine`'s batch flags, as parsed. */
export interface BatchFlags {
  /** `-b/--batch/--batch-size`: the size as given (checked): `3`, `10%` or `%10`. */
  size?: string
  /** `--batch-wait`, ms. */
  wait?: number
  /** `--batch-safe-limit` (else the master config's `batch_safe_limit`). */
  safeLimit?: number
  /** `--batch-safe-size` (else the master config's `batch_safe_size`). */
  safeSize?: string
  failhard: boolean
}

/** A commander parser that accepts Salt's batch sizes; anything else is a usage error naming the flag. */
function batchSize(value: string): string {
  try {
    parseBatchSize(value)
    return value.trim()
  } catch (error) {
    if (error instanceof BatchSizeError) throw new InvalidArgumentError(error.reason)
    throw error
  }
}

/** Salt's batch flags on `brine`. */
export function addBatchOptions(program: Command): Command {
  return program
    .option('-b, --batch <size>', 'run on this many minions at a time (3), or this share of those answering a ping first (10%)', batchSize)
    .option('--batch-size <size>', 'the same as --batch', batchSize)
    .option('--batch-wait <seconds>', 'seconds a minion’s slot stays empty after it returned, before the next minion takes it', nonNegativeSeconds)
    .option('--batch-safe-limit <n>', 'switch to batch mode when the target matches at least this many minions (config batch_safe_limit)', integer)
    .option('--batch-safe-size <size>', 'the batch size of that switch (config batch_safe_size, default 8)', batchSize)
    .option('--failhard', 'stop a batch run at the first minion that fails or does not return')
}

/** The batch flags out of commander's options; an exit code when they conflict with the rest. */
export function readBatchFlags(options: Record<string, unknown>, io: CommandIO): BatchFlags | number {
  const flags: BatchFlags = { failhard: options['failhard'] === true }
  const size = options['batch'] ?? options['batchSize']
  if (typeof size === 'string') flags.size = size
  if (typeof options['batchWait'] === 'number') flags.wait = secondsToMs(options['batchWait'], '--batch-wait')
  if (typeof options['batchSafeLimit'] === 'number') flags.safeLimit = options['batchSafeLimit']
  if (typeof options['batchSafeSize'] === 'string') flags.safeSize = options['batchSafeSize']
  if (flags.size !== undefined && options['async'] === true) {
    // Salt ignores --async here; a batch waits for each minion before the next, so it cannot be async.
    io.stderr.write('brine: error: --async cannot be combined with --batch: a batch run waits for each batch to return\n')
    return EXIT_USAGE
  }
  return flags
}

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

/** How returns are shown: the outputter `--out` (or the config) chose, and the display options. */
export interface BatchView {
  out?: string | undefined
  display: DisplayOptions
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
  const { out, display } = view
  const options: BatchOptions = { tgtType: args.tgtType, batch: plan.size, failhard: args.batch.failhard }
  if (args.timeout !== undefined) options.timeout = args.timeout
  if (args.ret !== undefined) options.ret = args.ret
  if (args.batch.wait !== undefined) options.batchWait = args.batch.wait
  if (plan.ping !== undefined) options.ping = plan.ping
  if (io.signal !== undefined) options.signal = io.signal
  const live = new LiveLine(io, '{bar} {value}/{total} done, {running} running, {waiting} waiting')
  const print = (text: string): void => {
    if (!args.static) live.write(text)
  }
  const collected: Record<string, unknown> = {}
  const jids: string[] = []
  let matched = true
  let code = EXIT_OK
  let failedRetcode = false
  /** The last minion's outcome: what a failhard stop names. */
  let last: CliReturn | undefined
  const note = (event: Extract<BatchEvent, { progress: unknown }>): void => live.set(event.progress.done, { running: event.progress.running, waiting: event.progress.waiting })
  try {
    for await (const event of client.cmdBatch(args.tgt, args.fun, args.arg, options)) {
      switch (event.type) {
        case 'ping': {
          matched = event.minions.length > 0
          if (!args.hideTimeout) {
            for (const id of event.down) {
              code = Math.max(code, EXIT_GENERIC)
              if (args.static) collected[id] = NO_RESPONSE
              print(`Minion ${id} did not respond. No job will be sent.\n`)
            }
          }
          if (event.up.length > 0) live.start(event.up.length, 0, { running: 0, waiting: event.up.length })
          break
        }
        case 'batch': {
          jids.push(event.jid)
          print(`\nExecuting run on ${pythonRepr(event.minions)}\n\n`)
          if (args.showJid) print(`jid: ${event.jid}\n`)
          if (args.verbose) print(jobBanner(event.jid))
          note(event)
          break
        }
        case 'return': {
          const { item } = event
          last = item
          note(event)
          if (item.status === 'missing' && args.hideTimeout) break
          code = Math.max(code, exitCodeOf(item))
          if (item.status === 'returned' && exitCodeOf(item) !== EXIT_OK) failedRetcode = true
          if (args.static) {
            collected[item.id] = item.status === 'returned' ? item.ret : NO_RESPONSE
            break
          }
          if (item.status === 'missing') {
            const text =
              out === undefined || out === 'nested'
                ? renderOutput('no_return', { [item.id]: NO_RESPONSE }, display)
                : renderOutput(out, { jid: item.jid, [item.id]: NO_RESPONSE }, display)
            print(text)
            break
          }
          // Salt's batch document: the return under the minion's id, with the job's retcode and jid beside it.
          print(renderOutput(out ?? item.out ?? 'nested', { retcode: item.retcode, jid: item.jid, [item.id]: item.ret }, display))
          break
        }
        case 'failhard': {
          live.stop()
          const what = last?.status === 'missing' ? 'did not return' : 'returned with non-zero exit code'
          let text = `ERROR: Minion ${event.id} ${what}. Batch run stopped due to failhard`
          if (event.unsent.length > 0) text += `; not sent to ${pythonRepr(event.unsent)}`
          if (event.running.length > 0) text += `; still running on ${pythonRepr(event.running)}`
          io.stderr.write(`${text}\n`)
          break
        }
      }
    }
  } finally {
    live.stop()
  }
  if (!matched) {
    io.stderr.write('No minions matched the target.\n')
    return EXIT_NO_MINIONS
  }
  if (io.signal?.aborted === true) {
    io.stderr.write(
      `Exiting gracefully on Ctrl-c\nThis batch's jids are: ${jids.join(', ') || '(none yet)'}\nThe minions may not have all finished running and any remaining minions will return upon completion.\n`,
    )
    return EXIT_GENERIC
  }
  if (args.static && Object.keys(collected).length > 0) io.stdout.write(renderOutput(out ?? 'nested', collected, display))
  if (failedRetcode) io.stderr.write('ERROR: Minions returned with non-zero exit code\n')
  return code
}
