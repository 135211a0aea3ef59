import { RegexSyntaxError } from './errors.js'

/**
 * Python's `re` syntax, as Salt users write `-E`, `E@`, `P@` and grain_pcre targets, translated
 * to a JavaScript RegExp with the `v` flag. The translation keeps Python's meaning, not just its
 * spelling: `$` also matches before a final newline, `.` never matches `\n` without `(?s)`,
 * `\d`, `\w`, `\s` and `\b` are Unicode-aware unless `(?a)`, a `]` first in a set is literal,
 * `{,n}` is a repeat, `{` that is no repeat is literal, unknown escapes of ASCII letters are errors.
 *
 * Supported beyond plain syntax: global inline flags `(?aimsux)` (anywhere, applied to the whole
 * expression as Python 3.10 does), scoped `(?msx-msx:…)`, named groups `(?P<name>…)` and
 * back-references `(?P=name)`, `\1`…`\99`, `\A`, `\Z`, `\a`, octal, `\x`, `\u`, `\U` escapes,
 * comments `(?#…)` and verbose mode. Refused with a {@link RegexSyntaxError} naming the construct:
 * scoped case flags `(?i:…)`, conditionals `(?(1)…)`, atomic groups `(?>…)`, possessive
 * quantifiers, `\N{…}`, the LOCALE flag, and quantified look-arounds.
 */
export interface TranslatedRegex {
  /** The Python pattern as written. */
  readonly pattern: string
  /** The JavaScript source, to compile with {@link flags}. */
  readonly source: string
  /** JavaScript flags: `v`, plus `i` for Python's IGNORECASE. */
  readonly flags: string
}

interface Flags {
  i: boolean
  m: boolean
  s: boolean
  x: boolean
  /** ASCII-only `\d \w \s \b` (Python's re.ASCII). */
  a: boolean
}

const NO_FLAGS: Flags = { i: false, m: false, s: false, x: false, a: false }
const FLAG_LETTERS = new Set(['a', 'i', 'L', 'm', 's', 'u', 'x'])
const VERBOSE_SPACE = new Set([' ', '\t', '\n', '\r', '\v', '\f'])
const OCTAL = /^[0-7]$/
const DIGIT = /^[0-9]$/
const HEX = /^[0-9A-Fa-f]$/
const ASCII_LETTER = /^[A-Za-z]$/
const GROUP_NAME = /^[\p{XID_Start}_]\p{XID_Continue}*$/u

const UNICODE_WORD = '[\\p{L}\\p{N}_]'
const ASCII_WORD = '[A-Za-z0-9_]'
/** Python's str.isspace() characters (Unicode `\s`); JavaScript's `\s` differs (U+FEFF in, U+001C–U+001F and U+0085 out). */
const UNICODE_SPACE = '\\t-\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000'
const ASCII_SPACE = '\\t-\\r\\x20'

/** `\d \D \s \S \w \W` as a (nested, for `v`) class, in or out of a set. */
function category(letter: string, ascii: boolean): string {
  switch (letter) {
    case 'd':
      return ascii ? '[0-9]' : '\\p{Nd}'
    case 'D':
      return ascii ? '[^0-9]' : '\\P{Nd}'
    case 'w':
      return ascii ? ASCII_WORD : UNICODE_WORD
    case 'W':
      return `[^${(ascii ? ASCII_WORD : UNICODE_WORD).slice(1)}`
    case 's':
      return `[${ascii ? ASCII_SPACE : UNICODE_SPACE}]`
    default:
      return `[^${ascii ? ASCII_SPACE : UNICODE_SPACE}]`
  }
}

/** `base` with the inline flag letters `add` turned on (`u` turns `a` off; `L` is refused before) and `remove` turned off. */
function withFlags(base: Flags, add: string, remove: string): Flags {
  const next: Flags = { ...base }
  for (const letter of add) {
    if (letter === 'u') next.a = false
    else if (letter !== 'L') next[letter as keyof Flags] = true
  }
  for (const letter of remove) next[letter as keyof Flags] = false
  return next
}

/** `\b` (or `\B` when not `at`): Python's word boundary, Unicode or ASCII words. */
function wordBoundary(at: boolean, ascii: boolean): string {
  const word = ascii ? ASCII_WORD : UNICODE_WORD
  return at ? `(?:(?<=${word})(?!${word})|(?<!${word})(?=${word}))` : `(?:(?<=${word})(?=${word})|(?<!${word})(?!${word}))`
}

/** One character for a `v`-flag source, in or out of a set: letters, digits and `_` as they are, the rest escaped. */
function escapeChar(codePoint: number): string {
  if ((codePoint >= 0x30 && codePoint <= 0x39) || (codePoint >= 0x41 && codePoint <= 0x5a) || (codePoint >= 0x61 && codePoint <= 0x7a) || codePoint === 0x5f) {
    return String.fromCharCode(codePoint)
  }
  return codePoint < 0x80 ? `\\x${codePoint.toString(16).padStart(2, '0')}` : `\\u{${codePoint.toString(16)}}`
}

type Last = 'none' | 'anchor' | 'atom' | 'repeat' | 'lookaround'

interface OpenGroup {
  kind: 'capture' | 'group' | 'lookaround'
  start: number
  number?: number
  saved: Flags
}

type ClassItem = { kind: 'char'; codePoint: number; text: string } | { kind: 'set'; text: string }

const SIMPLE_ESCAPES: Record<string, number> = { a: 7, f: 12, n: 10, r: 13, t: 9, v: 11 }

/** One pass over the pattern with the given global flags; reports the global flags it met. */
class Translator {
  readonly #pattern: string
  #pos = 0
  #out = ''
  #flags: Flags
  readonly globalFlags: Flags
  #last: Last = 'none'
  #groups = 0
  readonly #open: OpenGroup[] = []
  readonly #closed = new Set<number>()
  readonly #names = new Map<string, number>()

  constructor(pattern: string, global: Flags) {
    this.#pattern = pattern
    this.#flags = { ...global }
    this.globalFlags = { ...global }
  }

  #fail(problem: string, position = this.#pos): never {
    throw new RegexSyntaxError(this.#pattern, position, problem)
  }

  #emit(text: string, last: Last): void {
    this.#out += text
    this.#last = last
  }

  run(): string {
    const pattern = this.#pattern
    while (this.#pos < pattern.length) {
      const char = pattern[this.#pos] as string
      if (this.#flags.x) {
        if (VERBOSE_SPACE.has(char)) {
          this.#pos++
          continue
        }
        if (char === '#') {
          const end = pattern.indexOf('\n', this.#pos)
          this.#pos = end === -1 ? pattern.length : end + 1
          continue
        }
      }
      switch (char) {
        case '(':
          this.#openGroup()
          break
        case ')':
          this.#closeGroup()
          break
        case '[':
          this.#set()
          break
        case '\\':
          this.#escape()
          break
        case '|':
          this.#pos++
          this.#emit('|', 'none')
          break
        case '^':
          this.#pos++
          // No JavaScript `m` flag is ever used: `^` is the start of input; Python's MULTILINE `^` also follows each `\n`.
          this.#emit(this.#flags.m ? '(?<![^\\n])' : '^', 'anchor')
          break
        case '$':
          this.#pos++
          // Python's `$` also matches before a newline that ends the string (or, MULTILINE, before any `\n`).
          this.#emit(this.#flags.m ? '(?=\\n|$)' : '(?=\\n?$)', 'anchor')
          break
        case '.':
          this.#pos++
          this.#emit(this.#flags.s ? '[\\s\\S]' : '[^\\n]', 'atom')
          break
        case '*':
        case '+':
        case '?': {
          const start = this.#pos++
          this.#quantifier(char === '*' ? '*' : char === '+' ? '+' : '?', start)
          break
        }
        case '{':
          this.#brace()
          break
        default: {
          const codePoint = pattern.codePointAt(this.#pos) as number
          this.#pos += codePoint > 0xffff ? 2 : 1
          this.#emit(escapeChar(codePoint), 'atom')
        }
      }
    }
    const unclosed = this.#open.at(-1)
    if (unclosed !== undefined) this.#fail('missing ), unterminated subpattern', unclosed.start)
    return this.#out
  }

  #quantifier(text: string, start: number): void {
    if (this.#last === 'none' || this.#last === 'anchor') this.#fail('nothing to repeat', start)
    if (this.#last === 'repeat') {
      this.#fail(this.#pattern[start] === '+' ? "multiple repeat (possessive quantifiers such as '*+' are not supported)" : 'multiple repeat', start)
    }
    if (this.#last === 'lookaround') this.#fail('a repeated look-around assertion is not supported', start)
    let lazy = ''
    if (this.#pattern[this.#pos] === '?') {
      lazy = '?'
      this.#pos++
    }
    this.#emit(text + lazy, 'repeat')
  }

  /** `{m,n}`, `{m}`, `{,n}`, `{m,}`, `{,}` are repeats; any other `{` is a literal, as in Python. */
  #brace(): void {
    const pattern = this.#pattern
    const start = this.#pos
    let pos = start + 1
    let low = ''
    let high = ''
    let comma = false
    while (DIGIT.test(pattern[pos] ?? '')) low += pattern[pos++]
    if (pattern[pos] === ',') {
      comma = true
      pos++
      while (DIGIT.test(pattern[pos] ?? '')) high += pattern[pos++]
    }
    if (pattern[pos] !== '}' || (low === '' && !comma)) {
      this.#pos = start + 1
      this.#emit(escapeChar(0x7b), 'atom')
      return
    }
    this.#pos = pos + 1
    const min = low === '' ? 0 : Number(low)
    const max = comma ? (high === '' ? Infinity : Number(high)) : min
    if (min >= 4294967295 || (max !== Infinity && max >= 4294967295)) this.#fail('the repetition number is too large', start)
    if (max < min) this.#fail('min repeat greater than max repeat', start)
    this.#quantifier(comma ? `{${min},${max === Infinity ? '' : max}}` : `{${min}}`, start)
  }

  #openGroup(): void {
    const pattern = this.#pattern
    const start = this.#pos
    this.#pos++
    if (pattern[this.#pos] !== '?') {
      this.#groups++
      this.#open.push({ kind: 'capture', start, number: this.#groups, saved: this.#flags })
      this.#emit('(', 'none')
      return
    }
    this.#pos++
    const char = pattern[this.#pos]
    switch (char) {
      case ':':
        this.#pos++
        this.#open.push({ kind: 'group', start, saved: this.#flags })
        this.#emit('(?:', 'none')
        return
      case 'P': {
        this.#pos++
        const kind = pattern[this.#pos]
        if (kind === '<') {
          this.#pos++
          const name = this.#groupName('>')
          const known = this.#names.get(name)
          if (known !== undefined) this.#fail(`redefinition of group name '${name}' as group ${this.#groups + 1}; was group ${known}`, start)
          this.#groups++
          this.#names.set(name, this.#groups)
          this.#open.push({ kind: 'capture', start, number: this.#groups, saved: this.#flags })
          this.#emit(`(?<${name}>`, 'none')
          return
        }
        if (kind === '=') {
          this.#pos++
          const name = this.#groupName(')')
          const number = this.#names.get(name)
          if (number === undefined) this.#fail(`unknown group name '${name}'`, start)
          if (!this.#closed.has(number)) this.#fail('cannot refer to an open group', start)
          this.#emit(`\\k<${name}>`, 'atom')
          return
        }
        return this.#fail(`unknown extension ?P${kind ?? ''}`, start)
      }
      case '=':
      case '!':
        this.#pos++
        this.#open.push({ kind: 'lookaround', start, saved: this.#flags })
        this.#emit(`(?${char}`, 'none')
        return
      case '<': {
        const next = pattern[this.#pos + 1]
        if (next === '=' || next === '!') {
          this.#pos += 2
          this.#open.push({ kind: 'lookaround', start, saved: this.#flags })
          this.#emit(`(?<${next}`, 'none')
          return
        }
        return this.#fail(`unknown extension ?<${next ?? ''} (Python names a group with (?P<name>…))`, start)
      }
      case '#': {
        const end = pattern.indexOf(')', this.#pos)
        if (end === -1) this.#fail('missing ), unterminated comment', start)
        this.#pos = end + 1
        return
      }
      case '(':
        return this.#fail('conditional groups (?(…)…|…) are not supported', start)
      case '>':
        return this.#fail('atomic groups (?>…) are not supported', start)
      default:
        if (char !== undefined && (FLAG_LETTERS.has(char) || char === '-')) return this.#inlineFlags(start)
        return this.#fail(`unknown extension ?${char ?? ''}`, start)
    }
  }

  #groupName(terminator: string): string {
    const pattern = this.#pattern
    const end = pattern.indexOf(terminator, this.#pos)
    if (end === -1) this.#fail(`missing ${terminator}, unterminated name`)
    const name = pattern.slice(this.#pos, end)
    if (name === '') this.#fail('missing group name')
    if (!GROUP_NAME.test(name)) this.#fail(`bad character in group name '${name}'`)
    this.#pos = end + 1
    return name
  }

  /** `(?imsx)` (global) or `(?imsx-imsx:...)` (scoped). */
  #inlineFlags(start: number): void {
    const { add, remove, end } = this.#readInlineFlags(start)
    const next = withFlags(this.#flags, add, remove)
    if (end === ')') {
      if (remove !== '') this.#fail('missing :', start)
      // Global flags apply to the whole expression (Python 3.10, which Salt 3006 ships, allows them anywhere).
      Object.assign(this.globalFlags, withFlags(this.globalFlags, add, ''))
      this.#flags = next
      return
    }
    if (next.i !== this.#flags.i) {
      this.#fail(
        `scoped case flags (?${add}${remove === '' ? '' : `-${remove}`}:…) are not supported; put (?i) at the start to ignore case in the whole expression`,
        start,
      )
    }
    this.#open.push({ kind: 'group', start, saved: this.#flags })
    this.#flags = next
    this.#emit('(?:', 'none')
  }

  /** The letters of `(?add-remove` and what closes them (`)` or `:`), refusing what Python refuses for a str pattern. */
  #readInlineFlags(start: number): { add: string; remove: string; end: ')' | ':' } {
    const pattern = this.#pattern
    let add = ''
    let remove = ''
    while (FLAG_LETTERS.has(pattern[this.#pos] ?? '')) add += pattern[this.#pos++]
    if (pattern[this.#pos] === '-') {
      this.#pos++
      while (FLAG_LETTERS.has(pattern[this.#pos] ?? '')) remove += pattern[this.#pos++]
      if (remove === '') this.#fail('missing flag')
    }
    const end = pattern[this.#pos]
    if (end !== ')' && end !== ':') {
      return this.#fail(end !== undefined && ASCII_LETTER.test(end) ? 'unknown flag' : 'missing -, : or )')
    }
    this.#pos++
    if (add.includes('L') || remove.includes('L')) this.#fail("bad inline flags: cannot use 'L' flag with a str pattern", start)
    if (add.includes('a') && add.includes('u')) this.#fail("bad inline flags: flags 'a', 'u' and 'L' are incompatible", start)
    if (/[au]/.test(remove)) this.#fail("bad inline flags: cannot turn off flags 'a', 'u' and 'L'", start)
    return { add, remove, end }
  }

  #closeGroup(): void {
    const group = this.#open.pop()
    if (group === undefined) this.#fail('unbalanced parenthesis')
    this.#pos++
    this.#flags = group.saved
    if (group.number !== undefined) this.#closed.add(group.number)
    this.#emit(')', group.kind === 'lookaround' ? 'lookaround' : 'atom')
  }

  #escape(): void {
    const pattern = this.#pattern
    const start = this.#pos
    this.#pos++
    const char = pattern[this.#pos]
    if (char === undefined) this.#fail('bad escape (end of pattern)', start)
    this.#pos++
    const ascii = this.#flags.a
    switch (char) {
      case 'A':
        return this.#emit('^', 'anchor')
      case 'Z':
        return this.#emit('$', 'anchor')
      case 'b':
      case 'B':
        return this.#emit(wordBoundary(char === 'b', ascii), 'anchor')
      case 'd':
      case 'D':
      case 's':
      case 'S':
      case 'w':
      case 'W':
        return this.#emit(category(char, ascii), 'atom')
      case '0': {
        let digits = '0'
        while (digits.length < 3 && OCTAL.test(pattern[this.#pos] ?? '')) digits += pattern[this.#pos++]
        return this.#emit(escapeChar(parseInt(digits, 8)), 'atom')
      }
      default:
        break
    }
    if (DIGIT.test(char)) return this.#digitEscape(char, start)
    const codePoint = this.#characterEscape(char, start)
    this.#emit(escapeChar(codePoint), 'atom')
  }

  /** `\1` to `\99` a group reference, or three octal digits a character, as Python decides. */
  #digitEscape(first: string, start: number): void {
    const pattern = this.#pattern
    let digits = first
    if (DIGIT.test(pattern[this.#pos] ?? '')) {
      digits += pattern[this.#pos++]
      if (OCTAL.test(digits[0] as string) && OCTAL.test(digits[1] as string) && OCTAL.test(pattern[this.#pos] ?? '')) {
        digits += pattern[this.#pos++]
        const value = parseInt(digits, 8)
        if (value > 0o377) this.#fail(`octal escape value \\${digits} outside of range 0-0o377`, start)
        return this.#emit(escapeChar(value), 'atom')
      }
    }
    const group = Number(digits)
    if (group > this.#groups) this.#fail(`invalid group reference ${group}`, start + 1)
    if (!this.#closed.has(group)) this.#fail('cannot refer to an open group', start)
    // In parentheses, so a digit that follows stays a digit.
    return this.#emit(`(?:\\${group})`, 'atom')
  }

  /** Escapes that stand for one character, in or out of a set: `\n`, `\x41`, `\u00e9`, `\U0001f600`, `\.`. */
  #characterEscape(char: string, start: number): number {
    const pattern = this.#pattern
    const simple = SIMPLE_ESCAPES[char]
    if (simple !== undefined) return simple
    if (char === 'x' || char === 'u' || char === 'U') {
      const length = char === 'x' ? 2 : char === 'u' ? 4 : 8
      let digits = ''
      while (digits.length < length && HEX.test(pattern[this.#pos] ?? '')) digits += pattern[this.#pos++]
      if (digits.length !== length) this.#fail(`incomplete escape \\${char}${digits}`, start)
      const value = parseInt(digits, 16)
      if (value > 0x10ffff) this.#fail(`bad escape \\${char}${digits}`, start)
      return value
    }
    if (char === 'N') this.#fail('named Unicode escapes \\N{…} are not supported', start)
    if (ASCII_LETTER.test(char) || char === '8' || char === '9') this.#fail(`bad escape \\${char}`, start)
    // Any other character stands for itself; a surrogate pair is one character.
    const codePoint = pattern.codePointAt(this.#pos - 1) as number
    if (codePoint > 0xffff) this.#pos++
    return codePoint
  }

  /** A set `[...]`: `]` first is literal, ranges between single characters only, classes nest (the `v` flag). */
  #set(): void {
    const pattern = this.#pattern
    const start = this.#pos
    this.#pos++
    let negate = false
    if (pattern[this.#pos] === '^') {
      negate = true
      this.#pos++
    }
    let body = ''
    let count = 0
    for (;;) {
      if (this.#pos >= pattern.length) this.#fail('unterminated character set', start)
      if (pattern[this.#pos] === ']' && count > 0) {
        this.#pos++
        break
      }
      const itemStart = this.#pos
      const first = this.#setItem()
      count++
      if (pattern[this.#pos] !== '-') {
        body += first.text
        continue
      }
      this.#pos++
      if (this.#pos >= pattern.length) this.#fail('unterminated character set', start)
      if (pattern[this.#pos] === ']') {
        this.#pos++
        body += first.text + escapeChar(0x2d)
        break
      }
      const second = this.#setItem()
      const written = pattern.slice(itemStart, this.#pos)
      if (first.kind !== 'char' || second.kind !== 'char' || second.codePoint < first.codePoint) this.#fail(`bad character range ${written}`, itemStart)
      body += `${first.text}-${second.text}`
    }
    this.#emit(`[${negate ? '^' : ''}${body}]`, 'atom')
  }

  #setItem(): ClassItem {
    const pattern = this.#pattern
    const start = this.#pos
    if (pattern[this.#pos] !== '\\') {
      const codePoint = pattern.codePointAt(this.#pos) as number
      this.#pos += codePoint > 0xffff ? 2 : 1
      return { kind: 'char', codePoint, text: escapeChar(codePoint) }
    }
    this.#pos++
    const char = pattern[this.#pos]
    if (char === undefined) this.#fail('unterminated character set', start)
    this.#pos++
    if ('dDsSwW'.includes(char)) return { kind: 'set', text: category(char, this.#flags.a) }
    if (char === 'b') return { kind: 'char', codePoint: 8, text: escapeChar(8) }
    if (OCTAL.test(char)) {
      let digits = char
      while (digits.length < 3 && OCTAL.test(pattern[this.#pos] ?? '')) digits += pattern[this.#pos++]
      const value = parseInt(digits, 8)
      if (value > 0o377) this.#fail(`octal escape value \\${digits} outside of range 0-0o377`, start)
      return { kind: 'char', codePoint: value, text: escapeChar(value) }
    }
    const codePoint = this.#characterEscape(char, start)
    return { kind: 'char', codePoint, text: escapeChar(codePoint) }
  }
}

const sameFlags = (a: Flags, b: Flags): boolean => a.i === b.i && a.m === b.m && a.s === b.s && a.x === b.x && a.a === b.a

/**
 * Translates a Python regular expression for JavaScript; throws {@link RegexSyntaxError} with
 * Python's wording ("nothing to repeat", "bad escape \q", "unterminated character set") and the
 * position, or naming a construct that cannot be translated. Linear in the pattern's length.
 */
export function translatePythonRegex(pattern: string): TranslatedRegex {
  let global = NO_FLAGS
  // Flags met mid-pattern apply to all of it: translate again from the start with them (at most once per flag).
  for (;;) {
    const translator = new Translator(pattern, global)
    const source = translator.run()
    if (sameFlags(translator.globalFlags, global)) {
      const flags = global.i ? 'iv' : 'v'
      try {
        new RegExp(source, flags)
      } catch (error) {
        throw new RegexSyntaxError(pattern, 0, `cannot be compiled as a JavaScript regular expression (${(error as Error).message})`)
      }
      return { pattern, source, flags }
    }
    global = translator.globalFlags
  }
}
