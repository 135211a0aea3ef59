/**
 * Salt's `yaml` outputter: `salt.utils.yaml.safe_dump` of the data, which is PyYAML's
 * SafeRepresenter (keys sorted, YAML 1.1 tags decide what needs quotes) writing through libyaml's
 * emitter (CSafeDumper, as Salt 3006 ships it). The emitter below follows libyaml's rules for the
 * values JSON-like data holds, so the text is the same byte for byte: which scalars go plain,
 * 'single' or "double" quoted, where long lines wrap at 80 columns, indentless block sequences
 * under a key, one-line flow style for `--out-indent -1`.
 *
 * The `yaml` package parses Brine's YAML; it is not used here because its emitter chooses styles
 * and wraps lines by rules of its own, and the point of this outputter is Salt's exact text.
 */
import { comparePython, pythonNumberRepr } from './python.js'

/** The tag PyYAML's SafeRepresenter gives a value, and the text it writes. */
interface ScalarNode {
  tag: 'str' | 'int' | 'float' | 'bool' | 'null' | 'binary'
  text: string
  /** Block literal for binary data, as represent_binary asks. */
  literal?: true
}

// PyYAML's implicit resolvers (YAML 1.1): a string matching one of these must be quoted to stay a string.
const RESOLVES_TO_OTHER_TYPE = [
  /^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$/,
  /^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/,
  /^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$/,
  /^(?:<<)$/,
  /^(?:~|null|Null|NULL|)$/,
  /^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$/,
  /^(?:=)$/,
]

/** SafeRepresenter.represent_float: repr(), lower-cased, with `.0` added before a bare exponent. */
function floatText(value: number): string {
  if (Number.isNaN(value)) return '.nan'
  if (value === Number.POSITIVE_INFINITY) return '.inf'
  if (value === Number.NEGATIVE_INFINITY) return '-.inf'
  const text = pythonNumberRepr(value).toLowerCase()
  return !text.includes('.') && text.includes('e') ? text.replace('e', '.0e') : text
}

/** base64.encodebytes: lines of 76 characters, each ending in a newline. */
function base64Lines(bytes: Uint8Array): string {
  const encoded = Buffer.from(bytes).toString('base64')
  let out = ''
  for (let index = 0; index < encoded.length; index += 76) out += `${encoded.slice(index, index + 76)}\n`
  return out
}

function represent(value: unknown): ScalarNode {
  if (value === null || value === undefined) return { tag: 'null', text: 'null' }
  if (typeof value === 'boolean') return { tag: 'bool', text: value ? 'true' : 'false' }
  if (typeof value === 'bigint') return { tag: 'int', text: value.toString() }
  if (typeof value === 'number') return Number.isInteger(value) ? { tag: 'int', text: pythonNumberRepr(value) } : { tag: 'float', text: floatText(value) }
  if (value instanceof Uint8Array) return { tag: 'binary', text: base64Lines(value), literal: true }
  return { tag: 'str', text: String(value) }
}

interface Analysis {
  empty: boolean
  multiline: boolean
  flowPlain: boolean
  blockPlain: boolean
  singleQuoted: boolean
  block: boolean
}

const isBreak = (char: string | undefined): boolean => char === '\r' || char === '\n' || char === '\x85' || char === '\u2028' || char === '\u2029'
const isBlankOrEnd = (char: string | undefined): boolean => char === undefined || char === ' ' || char === '\t' || char === '\0' || isBreak(char)

/** libyaml's IS_PRINTABLE: LF, printable ASCII, U+00A0–U+D7FF and U+E000–U+FFFD but the BOM. Not beyond U+FFFF. */
function isPrintable(char: string): boolean {
  const code = char.codePointAt(0) as number
  return code === 0x0a || (code >= 0x20 && code <= 0x7e) || (code >= 0xa0 && code <= 0xd7ff) || (code >= 0xe000 && code <= 0xfffd && code !== 0xfeff)
}

/** libyaml's yaml_emitter_analyze_scalar: which styles can carry this text. */
function analyze(text: string): Analysis {
  if (text === '') return { empty: true, multiline: false, flowPlain: false, blockPlain: true, singleQuoted: true, block: false }
  const chars = [...text]
  let blockIndicators = false
  let flowIndicators = false
  let lineBreaks = false
  let special = false
  let leadingSpace = false
  let leadingBreak = false
  let trailingSpace = false
  let trailingBreak = false
  let breakSpace = false
  let spaceBreak = false
  let previousSpace = false
  let previousBreak = false
  if (text.startsWith('---') || text.startsWith('...')) {
    blockIndicators = true
    flowIndicators = true
  }
  let precededByWhitespace = true
  chars.forEach((char, index) => {
    const followedByWhitespace = isBlankOrEnd(chars[index + 1])
    if (index === 0) {
      if ('#,[]{}&*!|>\'"%@`'.includes(char)) {
        flowIndicators = true
        blockIndicators = true
      }
      if (char === '?' || char === ':') {
        flowIndicators = true
        if (followedByWhitespace) blockIndicators = true
      }
      if (char === '-' && followedByWhitespace) {
        flowIndicators = true
        blockIndicators = true
      }
    } else {
      if (',?[]{}'.includes(char)) flowIndicators = true
      if (char === ':') {
        flowIndicators = true
        if (followedByWhitespace) blockIndicators = true
      }
      if (char === '#' && precededByWhitespace) {
        flowIndicators = true
        blockIndicators = true
      }
    }
    if (!isPrintable(char)) special = true
    if (isBreak(char)) lineBreaks = true
    const last = index === chars.length - 1
    if (char === ' ') {
      if (index === 0) leadingSpace = true
      if (last) trailingSpace = true
      if (previousBreak) breakSpace = true
      previousSpace = true
      previousBreak = false
    } else if (isBreak(char)) {
      if (index === 0) leadingBreak = true
      if (last) trailingBreak = true
      if (previousSpace) spaceBreak = true
      previousSpace = false
      previousBreak = true
    } else {
      previousSpace = false
      previousBreak = false
    }
    precededByWhitespace = isBlankOrEnd(char)
  })
  const result: Analysis = { empty: false, multiline: lineBreaks, flowPlain: true, blockPlain: true, singleQuoted: true, block: true }
  if (leadingSpace || leadingBreak || trailingSpace || trailingBreak) result.flowPlain = result.blockPlain = false
  if (trailingSpace) result.block = false
  if (breakSpace) result.flowPlain = result.blockPlain = result.singleQuoted = false
  if (spaceBreak || special) result.flowPlain = result.blockPlain = result.singleQuoted = result.block = false
  if (lineBreaks) result.flowPlain = result.blockPlain = false
  if (flowIndicators) result.flowPlain = false
  if (blockIndicators) result.blockPlain = false
  return result
}

/** Where a node sits, as libyaml's emit_node flags it. */
interface Context {
  mapping?: boolean
  simpleKey?: boolean
}

const DOUBLE_QUOTE_ESCAPES: Record<number, string> = {
  0x00: '0',
  0x07: 'a',
  0x08: 'b',
  0x09: 't',
  0x0a: 'n',
  0x0b: 'v',
  0x0c: 'f',
  0x0d: 'r',
  0x1b: 'e',
  0x22: '"',
  0x5c: '\\',
  0x85: 'N',
  0xa0: '_',
  0x2028: 'L',
  0x2029: 'P',
}

/** libyaml's emitter state for one document, writing to a string. */
class Emitter {
  private out = ''
  private column = 0
  private whitespace = true
  private indention = true
  private indent = -1
  private readonly indents: number[] = []
  private flowLevel = 0

  constructor(
    private readonly bestIndent: number,
    private readonly bestWidth: number,
    private readonly flowStyle: boolean,
  ) {}

  document(value: unknown): string {
    this.node(value, {})
    this.writeIndent()
    return this.out
  }

  private put(text: string): void {
    this.out += text
    this.column += [...text].length
  }

  private putBreak(): void {
    this.out += '\n'
    this.column = 0
  }

  /** WRITE_BREAK: a newline as a line break; another break character written as itself, starting a new line. */
  private writeBreak(char: string): void {
    if (char === '\n') this.putBreak()
    else {
      this.out += char
      this.column = 0
    }
  }

  private increaseIndent(flow: boolean, indentless: boolean): void {
    this.indents.push(this.indent)
    if (this.indent < 0) this.indent = flow ? this.bestIndent : 0
    else if (!indentless) this.indent += this.bestIndent
  }

  private popIndent(): void {
    this.indent = this.indents.pop() as number
  }

  private writeIndent(): void {
    const indent = Math.max(this.indent, 0)
    if (!this.indention || this.column > indent || (this.column === indent && !this.whitespace)) this.putBreak()
    if (this.column < indent) this.put(' '.repeat(indent - this.column))
    this.whitespace = true
    this.indention = true
  }

  private writeIndicator(indicator: string, needWhitespace: boolean, isWhitespace = false, isIndention = false): void {
    if (needWhitespace && !this.whitespace) this.put(' ')
    this.put(indicator)
    this.whitespace = isWhitespace
    this.indention = this.indention && isIndention
  }

  private node(value: unknown, context: Context): void {
    if (Array.isArray(value)) {
      if (this.flowLevel > 0 || this.flowStyle || value.length === 0) this.flowSequence(value)
      else this.blockSequence(value, context)
    } else if (isRecord(value)) {
      const keys = Object.keys(value).sort(comparePython)
      if (this.flowLevel > 0 || this.flowStyle || keys.length === 0) this.flowMapping(value, keys)
      else this.blockMapping(value, keys)
    } else {
      this.scalar(represent(value), context)
    }
  }

  /** libyaml's check_simple_key: a key on one line, at most 128 bytes with its tag. */
  private isSimpleKey(key: string): boolean {
    const node = represent(key)
    const analysis = analyze(node.text)
    return !analysis.multiline && Buffer.byteLength(node.text) <= 128
  }

  private flowSequence(items: readonly unknown[]): void {
    this.writeIndicator('[', true, true)
    this.increaseIndent(true, false)
    this.flowLevel++
    items.forEach((item, index) => {
      if (index > 0) this.writeIndicator(',', false)
      if (this.column > this.bestWidth) this.writeIndent()
      this.node(item, {})
    })
    this.flowLevel--
    this.popIndent()
    this.writeIndicator(']', false)
  }

  private flowMapping(record: Record<string, unknown>, keys: readonly string[]): void {
    this.writeIndicator('{', true, true)
    this.increaseIndent(true, false)
    this.flowLevel++
    keys.forEach((key, index) => {
      if (index > 0) this.writeIndicator(',', false)
      if (this.column > this.bestWidth) this.writeIndent()
      if (this.isSimpleKey(key)) {
        this.node(key, { mapping: true, simpleKey: true })
        this.writeIndicator(':', false)
      } else {
        this.writeIndicator('?', true)
        this.node(key, { mapping: true })
        if (this.column > this.bestWidth) this.writeIndent()
        this.writeIndicator(':', true)
      }
      this.node(record[key], { mapping: true })
    })
    this.flowLevel--
    this.popIndent()
    this.writeIndicator('}', false)
  }

  private blockSequence(items: readonly unknown[], context: Context): void {
    // A list under a key is not indented further (PyYAML's default, and Salt's).
    this.increaseIndent(false, context.mapping === true && !this.indention)
    for (const item of items) {
      this.writeIndent()
      this.writeIndicator('-', true, false, true)
      this.node(item, {})
    }
    this.popIndent()
  }

  private blockMapping(record: Record<string, unknown>, keys: readonly string[]): void {
    this.increaseIndent(false, false)
    for (const key of keys) {
      this.writeIndent()
      if (this.isSimpleKey(key)) {
        this.node(key, { mapping: true, simpleKey: true })
        this.writeIndicator(':', false)
      } else {
        this.writeIndicator('?', true, false, true)
        this.node(key, { mapping: true })
        this.writeIndent()
        this.writeIndicator(':', true, false, true)
      }
      this.node(record[key], { mapping: true })
    }
    this.popIndent()
  }

  private scalar(node: ScalarNode, context: Context): void {
    const analysis = analyze(node.text)
    // The serializer's implicit flags: would the plain text read back as this tag, would quoted text.
    const plainImplicit = node.tag === 'str' ? !RESOLVES_TO_OTHER_TYPE.some((pattern) => pattern.test(node.text)) : !node.literal
    const quotedImplicit = node.tag === 'str'
    const simpleKey = context.simpleKey === true
    let style: 'plain' | 'single' | 'double' | 'literal' = node.literal ? 'literal' : 'plain'
    if (simpleKey && analysis.multiline) style = 'double'
    if (style === 'plain') {
      if ((this.flowLevel > 0 && !analysis.flowPlain) || (this.flowLevel === 0 && !analysis.blockPlain)) style = 'single'
      if (analysis.empty && (this.flowLevel > 0 || simpleKey)) style = 'single'
      if (!plainImplicit) style = 'single'
    }
    if (style === 'single' && !analysis.singleQuoted) style = 'double'
    if (style === 'literal' && (!analysis.block || this.flowLevel > 0 || simpleKey)) style = 'double'
    // A tag is written only when neither implicit flag holds (here: binary data).
    if (!plainImplicit && !quotedImplicit) this.writeIndicator(`!!${node.tag}`, true)
    this.increaseIndent(true, false)
    const allowBreaks = !simpleKey
    if (style === 'plain') this.writePlain(node.text, allowBreaks)
    else if (style === 'single') this.writeSingleQuoted(node.text, allowBreaks)
    else if (style === 'double') this.writeDoubleQuoted(node.text, allowBreaks)
    else this.writeLiteral(node.text)
    this.popIndent()
  }

  private writePlain(text: string, allowBreaks: boolean): void {
    const chars = [...text]
    if (!this.whitespace && (chars.length > 0 || this.flowLevel > 0)) this.put(' ')
    this.writeFoldable(chars, allowBreaks, false)
    this.whitespace = false
    this.indention = false
  }

  private writeSingleQuoted(text: string, allowBreaks: boolean): void {
    this.writeIndicator("'", true)
    if (this.writeFoldable([...text], allowBreaks, true)) this.writeIndent()
    this.writeIndicator("'", false)
    this.whitespace = false
    this.indention = false
  }

  /**
   * The text of a plain or single-quoted scalar, as libyaml writes both: a single space past the
   * width becomes a line break (a quoted scalar never folds at its first or last character), a
   * newline is written twice so it reads back as one, and a quote is doubled inside quotes.
   * Returns whether the text ended in a line break.
   */
  private writeFoldable(chars: readonly string[], allowBreaks: boolean, quoted: boolean): boolean {
    let spaces = false
    let breaks = false
    chars.forEach((char, index) => {
      if (char === ' ') {
        const foldable = !quoted || (index !== 0 && index !== chars.length - 1)
        if (allowBreaks && !spaces && this.column > this.bestWidth && foldable && chars[index + 1] !== ' ') this.writeIndent()
        else this.put(char)
        spaces = true
      } else if (isBreak(char)) {
        if (!breaks && char === '\n') this.putBreak()
        this.writeBreak(char)
        this.indention = true
        breaks = true
      } else {
        if (breaks) this.writeIndent()
        this.put(quoted && char === "'" ? "''" : char)
        this.indention = false
        spaces = false
        breaks = false
      }
    })
    return breaks
  }

  private writeDoubleQuoted(text: string, allowBreaks: boolean): void {
    this.writeIndicator('"', true)
    const chars = [...text]
    let spaces = false
    chars.forEach((char, index) => {
      const code = char.codePointAt(0) as number
      if (!isPrintable(char) || code === 0xfeff || isBreak(char) || char === '"' || char === '\\') {
        const named = DOUBLE_QUOTE_ESCAPES[code]
        if (named !== undefined) this.put(`\\${named}`)
        else if (code <= 0xff) this.put(`\\x${code.toString(16).toUpperCase().padStart(2, '0')}`)
        else if (code <= 0xffff) this.put(`\\u${code.toString(16).toUpperCase().padStart(4, '0')}`)
        else this.put(`\\U${code.toString(16).toUpperCase().padStart(8, '0')}`)
        spaces = false
      } else if (char === ' ') {
        if (allowBreaks && !spaces && this.column > this.bestWidth && index !== 0 && index !== chars.length - 1) {
          this.writeIndent()
          if (chars[index + 1] === ' ') this.put('\\')
        } else this.put(char)
        spaces = true
      } else {
        this.put(char)
        spaces = false
      }
    })
    this.writeIndicator('"', false)
    this.whitespace = false
    this.indention = false
  }

  private writeLiteral(text: string): void {
    this.writeIndicator('|', true)
    const chars = [...text]
    if (chars[0] === ' ' || isBreak(chars[0])) this.writeIndicator(String(this.bestIndent), false)
    const last = chars[chars.length - 1]
    if (chars.length === 0 || !isBreak(last)) this.writeIndicator('-', false)
    else if (chars.length === 1 || isBreak(chars[chars.length - 2])) this.writeIndicator('+', false)
    this.putBreak()
    this.indention = true
    this.whitespace = true
    let breaks = true
    for (const char of chars) {
      if (isBreak(char)) {
        this.writeBreak(char)
        this.indention = true
        breaks = true
      } else {
        if (breaks) this.writeIndent()
        this.put(char)
        this.indention = false
        breaks = false
      }
    }
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array)
}

export interface YamlOutputOptions {
  /**
   * Salt's `output_indent` (`--out-indent`): absent for block style with PyYAML's indent of 2; a
   * number ≥ 0 for block style with that indent (PyYAML honours 2 to 9 and uses 2 otherwise);
   * negative for one flow-style document (`{web1: {a: 1}}`), wrapped at 80 columns as PyYAML wraps it.
   */
  indent?: number | string | null
}

/** Salt's `yaml` outputter (salt/output/yaml_out.py). */
export function yamlOutput(data: unknown, options: YamlOutputOptions = {}): string {
  const indent = options.indent
  // Salt compares output_indent with 0; `pretty` or null raise there and Salt falls back to nested.
  // Brine prints block YAML for them instead.
  const flow = typeof indent === 'number' && indent < 0
  const bestIndent = typeof indent === 'number' && indent > 1 && indent < 10 ? indent : 2
  return new Emitter(bestIndent, 80, flow).document(data ?? null)
}
