import { jsonOutput } from './json.js'
import { nestedOutput, noReturnOutput } from './nested.js'
import { rawOutput } from './raw.js'
import { txtOutput } from './txt.js'
import { yamlOutput } from './yaml.js'

export { jsonOutput, nestedOutput, noReturnOutput, rawOutput, txtOutput, yamlOutput }
export { pythonRepr, pythonStr, splitLines } from './python.js'

/** The outputters `--out` accepts. */
export const OUTPUTTERS = ['nested', 'json', 'yaml', 'raw', 'txt', 'quiet'] as const
export type OutputterName = (typeof OUTPUTTERS)[number]

export interface DisplayOptions {
  color?: boolean
  indent?: number
  retcode?: number
}

export function isOutputter(name: string): name is OutputterName {
  return (OUTPUTTERS as readonly string[]).includes(name)
}

/**
 * Salt's display_output: renders `data` with outputter `name`, trailing whitespace stripped and
 * one newline added; '' for `quiet`. An unknown name (a minion's `out` hint we lack) falls back to nested.
 */
export function renderOutput(name: string, data: unknown, options: DisplayOptions = {}): string {
  let text: string
  switch (name) {
    case 'quiet':
      return ''
    case 'json':
      text = jsonOutput(data, { indent: options.indent })
      break
    case 'yaml':
      text = yamlOutput(data, { indent: options.indent })
      break
    case 'raw':
      text = rawOutput(data)
      break
    case 'txt':
      text = txtOutput(data)
      break
    case 'no_return':
      text = noReturnOutput(data as Record<string, string>, options)
      break
    default:
      text = nestedOutput(data, { color: options.color, retcode: options.retcode })
  }
  return `${text.trimEnd()}\n`
}
