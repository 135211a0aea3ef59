import { checkConfig, formatSource, type ConfigError, type ConfigSource, type LoadConfigOptions } from '@brine/config'
import { minionIdProblem, normalizeMinionId } from '@brine/crypt'
import { lookupUser } from '../daemon-process.js'
import { EXIT_GENERIC, EXIT_OK, type CommandIO } from '../io.js'

interface Problem {
  severity: 'error' | 'warning'
  source: ConfigSource
  message: string
}

/** The message without the `file:line: ` it starts with, since the report prints the source first. */
function withoutSource(message: string, source: ConfigSource): string {
  const prefix = `${formatSource(source)}: `
  return message.startsWith(prefix) ? message.slice(prefix.length) : message
}

/**
 * `brine-master --check-config` / `brine-minion --check-config` / `brine-syndic --check-config`: reads the role's config files as the daemon
 * would and prints every problem, one line each, `<file>:<line>: error|warning: <what>`, in file and line
 * order, then a summary. Beyond types it checks that `user` exists and that a minion's (or syndic's) `id` is usable.
 * Exit 1 when there is an error, 0 when there is none (warnings, such as an unknown key, do not fail it).
 */
export async function runCheckConfig(
  role: 'master' | 'minion' | 'syndic',
  options: Pick<LoadConfigOptions, 'configDir' | 'overrides'>,
  io: CommandIO,
  /** Problems found before loading, e.g. a `--set` value of the wrong type. */
  earlier: readonly ConfigError[] = [],
): Promise<number> {
  const name = `brine-${role}`
  const check = await checkConfig(role, options)
  const problems: Problem[] = []
  for (const error of [...check.errors, ...earlier]) {
    const source: ConfigSource = { file: error.file ?? 'defaults', line: error.line }
    problems.push({ severity: 'error', source, message: withoutSource(error.message, source) })
  }
  for (const warning of check.warnings) {
    const source: ConfigSource = { file: warning.file, line: warning.line }
    problems.push({ severity: 'warning', source, message: withoutSource(warning.message, source) })
  }
  const userSource = check.sources.get('user')
  if (userSource !== undefined && typeof check.opts.user === 'string' && lookupUser(check.opts.user) === undefined) {
    problems.push({ severity: 'error', source: userSource, message: `user '${check.opts.user}' does not exist on this host` })
  }
  if (role === 'minion' || role === 'syndic') {
    // The minion (and the syndic) normalise the id to NFC before checking it, so this does too.
    const problem = minionIdProblem(normalizeMinionId(check.opts.id))
    if (problem !== undefined) {
      problems.push({
        severity: 'error',
        source: check.sources.get('id') ?? { file: 'defaults (the host name)' },
        message: `id ${JSON.stringify(check.opts.id)} ${problem}`,
      })
    }
  }

  // In the order the daemon reads its files (the command line last), then by line.
  const rank = (source: ConfigSource): number => {
    const index = check.files.indexOf(source.file)
    return index < 0 ? check.files.length : index
  }
  problems.sort((a, b) => rank(a.source) - rank(b.source) || (a.source.line ?? 0) - (b.source.line ?? 0))
  for (const problem of problems) io.stdout.write(`${formatSource(problem.source)}: ${problem.severity}: ${problem.message}\n`)

  const errors = problems.filter((problem) => problem.severity === 'error').length
  const warnings = problems.length - errors
  const count = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? '' : 's'}`
  const files = check.files.length === 0 ? `no config file in ${options.configDir ?? '/etc/brine'}, defaults only` : check.files.join(', ')
  io.stdout.write(`${name}: ${errors === 0 ? 'config OK' : 'config has errors'}: ${count(errors, 'error')}, ${count(warnings, 'warning')} (${files})\n`)
  return errors === 0 ? EXIT_OK : EXIT_GENERIC
}
