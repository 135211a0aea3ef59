import { BrineError, registerErrors } from '@brine/core'

/** A bounded wait in a test, the demo or the bench ran out; names what was awaited and the limit. */
export class DeadlineError extends BrineError {
  override name = 'DeadlineError'
  readonly what: string
  readonly limit: number

  constructor(what: string, limit: number) {
    super(`gave up after ${limit} ms waiting for ${what}`, { what, limit })
    this.what = what
    this.limit = limit
  }
}

/** No free port was found below the kernel's ephemeral range. */
export class NoFreePortError extends BrineError {
  override name = 'NoFreePortError'
  constructor(low: number, high: number, tries: number) {
    super(`no free loopback port found in ${low}-${high} after ${tries} tries`, { low, high, tries })
  }
}

/** A started process exited, or printed nothing matching, before what a harness waited for. */
export class ProcessWaitError extends BrineError {
  override name = 'ProcessWaitError'
  constructor(message: string, context: { process: string; pid: number; limit?: number; pattern?: string }) {
    super(message, context)
  }
}

/** The harness cannot find what it runs (a package's files, a built CLI). */
export class HarnessSetupError extends BrineError {
  override name = 'HarnessSetupError'
}

registerErrors({ DeadlineError, NoFreePortError, ProcessWaitError, HarnessSetupError })
