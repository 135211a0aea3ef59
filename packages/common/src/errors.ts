import { BrineError } from '@brine/transport'

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

/** A target expression that cannot be evaluated: unbalanced parentheses, unknown prefix, bad regex. */
export class TargetError extends BrineError {
  override name = 'TargetError'
  readonly target: string
  readonly tgtType: string

  constructor(target: string, tgtType: string, problem: string, options?: ErrorOptions) {
    super(`invalid ${tgtType} target '${target}': ${problem}`, { target, tgtType, problem }, options)
    this.target = target
    this.tgtType = tgtType
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
