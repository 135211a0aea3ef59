import { BrineError, registerErrors } from '@brine/core'
import { truncateForMessage } from '@brine/protocol'

/**
 * A target that is refused: unbalanced parentheses, an unknown prefix or nodegroup, a bad
 * regular expression, a bound exceeded (length, depth, words, regex matching time). The target
 * is shown truncated to {@link SHOWN_TARGET_CHARS} characters, in the message and in `target`.
 */
export class TargetError extends BrineError {
  override name = 'TargetError'
  readonly target: string
  readonly tgtType: string
  readonly problem: string

  constructor(target: string, tgtType: string, problem: string, options?: ErrorOptions) {
    const shown = truncateForMessage(target)
    super(`invalid ${tgtType} target '${shown}': ${problem}`, { target: shown, tgtType, problem }, options)
    this.target = shown
    this.tgtType = tgtType
    this.problem = problem
  }
}

/** A Python regular expression that cannot be compiled, or uses a construct Brine cannot translate. */
export class RegexSyntaxError extends BrineError {
  override name = 'RegexSyntaxError'
  readonly pattern: string
  readonly position: number
  readonly problem: string

  constructor(pattern: string, position: number, problem: string) {
    const shown = truncateForMessage(pattern)
    super(`bad regular expression '${shown}': ${problem} at position ${position}`, { pattern: shown, position, problem })
    this.pattern = shown
    this.position = position
    this.problem = problem
  }
}

/**
 * Regular expression matching stopped at its time limit (catastrophic backtracking), or refused
 * because the same expression hit the limit a moment ago (`repeated`).
 */
export class RegexTimeoutError extends BrineError {
  override name = 'RegexTimeoutError'
  readonly pattern: string
  readonly limit: number
  readonly values: number
  readonly repeated: boolean

  constructor(pattern: string, context: { limit: number; values: number; repeated?: boolean; holdMs?: number }) {
    const shown = truncateForMessage(pattern)
    const repeated = context.repeated === true
    const message = repeated
      ? `regular expression '${shown}' exceeded the ${context.limit} ms matching limit moments ago; refused without matching for ${Math.ceil((context.holdMs ?? 0) / 1000)} s`
      : `regular expression '${shown}' did not finish matching ${context.values} ${context.values === 1 ? 'value' : 'values'} within ${context.limit} ms (catastrophic backtracking?); stopped`
    super(message, { pattern: shown, limit: context.limit, values: context.values, repeated })
    this.pattern = shown
    this.limit = context.limit
    this.values = context.values
    this.repeated = repeated
  }
}

/** Regular expression matching failed for another reason: the engine ran out of stack or memory, or its worker stopped. */
export class RegexMatchError extends BrineError {
  override name = 'RegexMatchError'
  readonly pattern: string
  readonly problem: string

  constructor(pattern: string, problem: string, options?: ErrorOptions) {
    const shown = truncateForMessage(pattern)
    super(`regular expression '${shown}' could not be matched: ${problem}`, { pattern: shown, problem }, options)
    this.pattern = shown
    this.problem = problem
  }
}

registerErrors({ TargetError, RegexSyntaxError, RegexTimeoutError, RegexMatchError })
