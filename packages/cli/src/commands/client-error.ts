import { TimeoutError } from '@brine/core'

/** Turns a client failure into one line an operator can act on. */
export function describeClientError(error: unknown): string {
  if (error instanceof TimeoutError) return `${error.message}; is brine-master running, and is this its config (-c)?`
  return error instanceof Error ? error.message : String(error)
}
