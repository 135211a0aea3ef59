import type { Logger } from '@brine/core'
import type { MasterConfig } from '@brine/config'
import type { Tgt } from '@brine/protocol'
import { LocalClient, type BatchEvent, type BatchJob, type BatchOptions, type ClientCredentials, type RunJobOptions } from '@brine/client'

/** A published job as `brine` reads it: @brine/client's Job (the shape batch mode reads too). */
export type CliJob = BatchJob

/** What `brine` needs of a LocalClient (tests pass a stand-in). */
export interface JobClient {
  /** Publishes with a reader of the job's returns already open (LocalClient's `runJob` with `listen: true`). */
  runJob(tgt: Tgt, fun: string, arg?: readonly unknown[], options?: RunJobOptions): Promise<CliJob>
  cmdAsync(tgt: Tgt, fun: string, arg?: readonly unknown[], options?: RunJobOptions): Promise<string>
  /** The minions `--subset` runs on (LocalClient's `subsetOf`: those that have `fun`, `count` of them at random). */
  subsetOf(tgt: Tgt, fun: string, count: number, options?: RunJobOptions): Promise<string[]>
  /** The minions a publish would expect, nothing published (LocalClient's `previewTarget`, `--preview-target`). */
  previewTarget(tgt: Tgt, fun: string, options?: RunJobOptions): Promise<string[]>
  /** Batch mode (LocalClient's `cmdBatch`). */
  cmdBatch(tgt: Tgt, fun: string, arg: readonly unknown[], options: BatchOptions): AsyncIterable<BatchEvent>
  /** The master config's keys `brine` reads (batch_safe_limit, batch_safe_size). */
  config(): Promise<Pick<MasterConfig, 'batch_safe_limit' | 'batch_safe_size'>>
  close(): Promise<void>
}

/** What a JobClient is made from: the config and credentials `brine` resolved once, before it connects. */
export interface JobClientOptions {
  configDir: string
  logger: Logger
  opts: MasterConfig
  /** Eauth credentials; absent with the root key. */
  credentials?: ClientCredentials
  /** The root key `brine` already read; absent with eauth credentials. */
  rootKey?: string
}

/** A LocalClient as `brine` uses it: each job's reader opened before its publish (no job-cache lookup on the way). */
export function localJobClient(options: JobClientOptions): JobClient {
  const client = new LocalClient({ ...options, origin: { client: 'cli' } })
  return {
    runJob: (tgt, fun, arg, jobOptions) => client.runJob(tgt, fun, arg, { ...jobOptions, listen: true }),
    cmdAsync: (tgt, fun, arg, jobOptions) => client.cmdAsync(tgt, fun, arg, jobOptions),
    subsetOf: (tgt, fun, count, subsetOptions) => client.subsetOf(tgt, fun, count, subsetOptions),
    previewTarget: (tgt, fun, previewOptions) => client.previewTarget(tgt, fun, previewOptions),
    cmdBatch: (tgt, fun, arg, batchOptions) => client.cmdBatch(tgt, fun, arg, batchOptions),
    config: () => client.config(),
    close: () => client.close(),
  }
}
