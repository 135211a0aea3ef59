/** What Salt's Summary block counts: the minions that returned, those that did not, those that returned a failure. */
export interface ReturnsCount {
  returned: number
  missing: readonly string[]
  failures: readonly string[]
}

const RULE = '-------------------------------------------'

/**
 * Salt's `--summary` (or `cli_summary`) block after a job's returns, on stdout: two blank lines, then the
 * counts; with `-v` the ids of minions that did not respond and of those that failed.
 */
export function returnsSummary(count: ReturnsCount, verbose: boolean): string {
  const lines = [
    '',
    '',
    RULE,
    'Summary',
    RULE,
    `# of minions targeted: ${count.returned + count.missing.length}`,
    `# of minions returned: ${count.returned}`,
    `# of minions that did not return: ${count.missing.length}`,
    `# of minions with errors: ${count.failures.length}`,
  ]
  if (verbose && count.missing.length > 0) lines.push(`Minions not responding: ${count.missing.join(' ')}`)
  if (verbose && count.failures.length > 0) lines.push(`Minions with failures: ${count.failures.join(' ')}`)
  lines.push(RULE)
  return `${lines.join('\n')}\n`
}
