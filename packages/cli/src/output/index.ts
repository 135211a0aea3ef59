import { isKeyListing, keyOutput } from './key.js'
import { jsonOutput } from './json.js'
import { nestedOutput, noReturnOutput, type NestedOptions } from './nested.js'
import { rawOutput } from './raw.js'
import { txtOutput } from './txt.js'
import { yamlOutput } from './yaml.js'

export { isKeyListing, jsonOutput, keyOutput, nestedOutput, noReturnOutput, rawOutput, txtOutput, yamlOutput }
export { dumps as pythonJsonDumps } from './json.js'
export { comparePython, pythonFloatRepr, pythonRepr, pythonStr, sortedKeys, splitLines } from './python.js'
export { getColors, SALT_COLORS, stripEscSequence, type Colors } from './colors.js'

/** The outputters `--out` accepts. */
export const OUTPUTTERS = ['nested', 'json', 'yaml', 'raw', 'txt', 'quiet'] as const
export type OutputterName = (typeof OUTPUTTERS)[number]

export interface DisplayOptions {
  color?: boolean
  /** Salt's `output_indent`: undefined when neither `--out-indent` nor the config set it. */
  indent?: number | string | null
  retcode?: number
  /** Salt's `strip_colors` (default true here). */
  stripColors?: boolean
}

export function isOutputter(name: string): name is OutputterName {
  return (OUTPUTTERS as readonly string[]).includes(name)
}

/**
 * Salt's display_output: renders `data` with outputter `name`, trailing whitespace stripped and
 * one newline added; '' for `quiet`. An unknown name (a minion's `out` hint we lack) falls back to
 * nested, and so does `key` for data that is not a key listing, as Salt's try_printout does.
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
    case 'text':
      text = txtOutput(data)
      break
    case 'no_return':
      text = noReturnOutput(data as Record<string, string>, options)
      break
    case 'key':
      if (isKeyListing(data)) {
        text = keyOutput(data, options)
        break
      }
      text = nestedOutput(data, nested(options))
      break
    default:
      text = nestedOutput(data, nested(options))
  }
  // display_output prints nothing at all for empty output (`salt-key -p nobody`).
  const trimmed = text.trimEnd()
  return trimmed === '' ? '' : `${trimmed}\n`
}

function nested(options: DisplayOptions): NestedOptions {
  const out: NestedOptions = {}
  if (options.color !== undefined) out.color = options.color
  if (options.retcode !== undefined) out.retcode = options.retcode
  if (options.stripColors !== undefined) out.stripColors = options.stripColors
  return out
}

/** How a command prints: the outputter chosen, and the options renderOutput takes. */
export interface OutputSettings extends DisplayOptions {
  /** `--out`, else the config's `output`; undefined means the command's default (a minion's hint, else nested). */
  out?: string
  color: boolean
}

export interface OutputFlags {
  out?: string
  outIndent?: number
  /** true for --force-color, false for --no-color. */
  color?: boolean
}

/**
 * Salt's choice of outputter and colour (salt.output.get_printout) from the command line and the
 * config (`output`, `output_indent`, `color`, `strip_colors`): flags win over the config;
 * `--force-color` colours, `--no-color` or `color: False` does not. Otherwise Brine colours only
 * a terminal, where Salt, whose `color` defaults to True, colours piped output too.
 */
export function outputSettings(opts: Readonly<Record<string, unknown>>, flags: OutputFlags, isTTY: boolean): OutputSettings {
  const settings: OutputSettings = { color: flags.color ?? (opts['color'] === false ? false : isTTY) }
  const out = flags.out ?? (typeof opts['output'] === 'string' ? opts['output'] : undefined)
  if (out !== undefined) settings.out = out
  const indent = flags.outIndent ?? opts['output_indent']
  if (indent !== undefined && (indent === null || typeof indent === 'number' || typeof indent === 'string')) settings.indent = indent
  if (typeof opts['strip_colors'] === 'boolean') settings.stripColors = opts['strip_colors']
  return settings
}
