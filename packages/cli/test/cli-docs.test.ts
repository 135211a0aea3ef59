import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { COMMANDS, memoryIO } from './helpers.js'

/** The CLI reference every option must be in (docs/cli.md), read once. */
const CLI_DOC = readFileSync(new URL('../../../docs/cli.md', import.meta.url), 'utf8')

/** Each option line of a `--help` text: its short flag (`-L`), if any, and its long one (`--list`). */
function optionsOf(help: string): Array<{ short?: string; long: string }> {
  const options: Array<{ short?: string; long: string }> = []
  for (const match of help.matchAll(/^ {2}(?:(-[A-Za-z]), )?(--[a-z][a-z0-9-]*)/gm))
    options.push({ ...(match[1] === undefined ? {} : { short: match[1] }), long: match[2]! })
  return options
}

/** Whether the reference names `flag` as a flag of its own (`-L` is not found inside `-LX` or `--L…`). */
const documented = (flag: string): boolean => new RegExp(`(^|[^\\w-])${flag.replace(/-/g, '\\-')}(?![\\w-])`).test(CLI_DOC)

describe.each(COMMANDS)('%s --help against docs/cli.md', (name, command) => {
  it('every option it lists is in the CLI reference, by its short or its long flag', async () => {
    const io = memoryIO()
    expect(await command(['--help'], io)).toBe(0)
    const options = optionsOf(io.out())
    expect(options.length, `${name} --help listed no option:\n${io.out()}`).toBeGreaterThan(2)
    const missing = options.filter((option) => !documented(option.long) && (option.short === undefined || !documented(option.short)))
    expect(missing.map((option) => `${name} ${option.short ?? ''} ${option.long}`.replace('  ', ' '))).toEqual([])
  })
})
