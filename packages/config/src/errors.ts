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

registerErrors({ ConfigError, YamlLoadError, LogFileError })
