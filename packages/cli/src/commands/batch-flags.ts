import { InvalidArgumentError, type Command } from 'commander'
import { secondsToMs } from '@brine/config'
import { BatchSizeError, parseBatchSize } from '@brine/client'
import { EXIT_USAGE, type CommandIO } from '../io.js'
import { integer, nonNegativeSeconds } from '../program.js'

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
