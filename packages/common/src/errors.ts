import { BrineError, registerErrors } from '@brine/core'

/** Where a config value came from: a file and line, or `command line`. */
export interface ConfigSource {
  file: string
  line?: number
}

/** Formats a source as `file:line`, or just the file when the line is unknown. */
export function formatSource(source: ConfigSource): string {
  return source.line === undefined ? source.file : `${source.file}:${source.line}`
}

/**
 * A config file or command-line override that cannot be used: bad YAML, a wrong type, an unknown
 * transport, two transports on one port. The message starts with `file:line` so an editor can jump there.
 */
export class ConfigError extends BrineError {
  override name = 'ConfigError'
  readonly key: string | undefined
  readonly file: string | undefined
  readonly line: number | undefined

  constructor(message: string, context: { key?: string; file?: string; line?: number } = {}, options?: ErrorOptions) {
    super(message, { key: context.key, file: context.file, line: context.line }, options)
    this.key = context.key
    this.file = context.file
    this.line = context.line
  }
}

/** How much of a target or pattern an error message shows: enough to recognise it, never megabytes. */
export const SHOWN_TARGET_CHARS = 200

/** `text` cut to `limit` characters, with how long it really was: `aaaa… (1048576 characters)`. */
export function truncateForMessage(text: string, limit = SHOWN_TARGET_CHARS): string {
  return text.length <= limit ? text : `${text.slice(0, limit)}… (${text.length} characters)`
}

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

/** A string that is not a jid in Salt's `YYYYMMDDhhmmssffffff` format. */
export class JidError extends BrineError {
  override name = 'JidError'
  constructor(jid: string, problem: string) {
    super(`invalid jid '${jid}': ${problem}`, { jid, problem })
  }
}

/** A wire load missing a field or carrying one of the wrong type. */
export class PayloadError extends BrineError {
  override name = 'PayloadError'
  readonly load: string
  readonly field: string

  constructor(load: string, field: string, problem: string) {
    super(`${load} load: field '${field}' ${problem}`, { load, field, problem })
    this.load = load
    this.field = field
  }
}

/**
 * Text that Salt's YAML loader would refuse: a syntax error, a duplicate key, a list as a key, an
 * unknown tag, too many aliases. `yamlifyArg` catches it and keeps the argument as typed, as Salt does.
 */
export class YamlLoadError extends BrineError {
  override name = 'YamlLoadError'
  readonly text: string
  readonly problem: string

  constructor(text: string, problem: string, options?: ErrorOptions) {
    const shown = text.length > 80 ? `${text.slice(0, 77)}...` : text
    super(`cannot load ${JSON.stringify(shown)} as YAML: ${problem}`, { text: shown, problem }, options)
    this.text = text
    this.problem = problem
  }
}

/** A daemon's `log_file` that cannot be opened or reopened (e.g. after logrotate, on SIGHUP). */
export class LogFileError extends BrineError {
  override name = 'LogFileError'
  readonly file: string

  constructor(file: string, action: 'open' | 'reopen' | 'write', options?: ErrorOptions) {
    const reason = options?.cause instanceof Error ? `: ${options.cause.message}` : ''
    super(`cannot ${action} log_file ${file}${reason}`, { file, action }, options)
    this.file = file
  }
}

/** A schedule entry (config `schedule:` or `schedule.add`) that cannot run: no function, no interval, a bad cron expression. */
export class ScheduleError extends BrineError {
  override name = 'ScheduleError'
  readonly job: string

  constructor(job: string, problem: string, options?: ErrorOptions) {
    super(`schedule job ${JSON.stringify(job.slice(0, 120))}: ${problem}`, { job: job.slice(0, 120), problem }, options)
    this.job = job
  }
}

registerErrors({
  ConfigError,
  TargetError,
  RegexSyntaxError,
  RegexTimeoutError,
  RegexMatchError,
  JidError,
  PayloadError,
  YamlLoadError,
  LogFileError,
  ScheduleError,
})
