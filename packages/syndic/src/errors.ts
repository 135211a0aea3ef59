/**
 * Every error class of `@brine/syndic`. Names are string literals (bundlers rename classes); context
 * carries what a log line needs (the directory, file, limit, jid or master involved).
 */
import { BrineError, registerErrors } from '@brine/core'

/** The syndic's spool of batches for an upper master is full: the batch is not kept (and is logged). */
export class SyndicSpoolFullError extends BrineError {
  override name = 'SyndicSpoolFullError'
  readonly dir: string
  readonly limit: number
  readonly size: number
  constructor(dir: string, size: number, used: number, limit: number) {
    super(
      `syndic spool ${dir} is full: a batch of ${size} bytes does not fit beside the ${used} bytes spooled (syndic_spool_max_bytes ${limit}); it is dropped`,
      { dir, size, used, limit },
    )
    this.dir = dir
    this.limit = limit
    this.size = size
  }
}

/** A spooled batch or journal line that cannot be read back; it is set aside, not retried. */
export class SyndicFileError extends BrineError {
  override name = 'SyndicFileError'
  readonly file: string
  constructor(file: string, reason: string, options?: ErrorOptions) {
    super(`${file}: ${reason}`, { file, reason }, options)
    this.file = file
  }
}

/** The syndic's own master refused or did not answer a request (a publish passed down, a job lookup). */
export class LowerMasterError extends BrineError {
  override name = 'LowerMasterError'
  readonly cmd: string
  constructor(cmd: string, reason: string, options?: ErrorOptions) {
    super(`the syndic's master did not do ${cmd}: ${reason}`, { cmd, reason }, options)
    this.cmd = cmd
  }
}

registerErrors({ SyndicSpoolFullError, SyndicFileError, LowerMasterError })
