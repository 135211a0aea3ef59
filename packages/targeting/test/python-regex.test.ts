import { describe, expect, it } from 'vitest'
import { RegexSyntaxError } from '../src/errors.js'
import { translatePythonRegex } from '../src/index.js'

/** Python's re.match(pattern, text) is not None, through the translation (these patterns are all benign). */
function rematch(pattern: string, text: string): boolean {
  const { source, flags } = translatePythonRegex(pattern)
  const regex = new RegExp(source, `${flags}y`)
  regex.lastIndex = 0
  return regex.test(text)
}

type Case = [pattern: string, text: string, matches: boolean]

// Each expected value is what CPython 3.10's re.match answers (Salt 3006 ships 3.10; the two cases with flags
// mid-pattern are errors from Python 3.11 on, which otherwise agrees on every case).
describe('Python regular expressions keep their meaning', () => {
  it.each<Case>([
    // Inline flags: at the start, and (as Python 3.10, which Salt 3006 ships) anywhere, for the whole expression.
    ['(?i)WEB', 'web1', true],
    ['WEB', 'web1', false],
    ['web(?i)', 'WEB1', true],
    ['(?i)[A-C]x', 'bX', true],
    // Named groups and back-references.
    ['(?P<kind>web|db)\\d+-(?P=kind)', 'web1-web', true],
    ['(?P<kind>web|db)\\d+-(?P=kind)', 'web1-db', false],
    ['(a)(b)\\2\\1', 'abba', true],
    ['(a)\\1 0', 'aa 0', true],
    // Anchors: re.match anchors at the start only; `$` also matches before a final newline, \Z does not.
    ['web', 'web1', true],
    ['eb1', 'web1', false],
    ['web1$', 'web1\n', true],
    ['web1\\Z', 'web1\n', false],
    ['\\Aweb1\\Z', 'web1', true],
    ['(?m)a$\\n^b', 'a\nb', true],
    ['a$\\n^b', 'a\nb', false],
    // `.` is not a newline unless DOTALL; JavaScript's `.` also refuses \r, Python's does not.
    ['a.b', 'a\nb', false],
    ['(?s)a.b', 'a\nb', true],
    ['a.b', 'a\rb', true],
    // Scoped flags other than case.
    ['(?s:a.)b', 'a\nb', true],
    ['(?x: a b )c', 'abc', true],
    ['(?a:\\d)', '٣', false],
    // Sets: `]` first is literal, classes inside sets, ranges.
    ['[]a]+$', ']a]', true],
    ['[^]a]', ']', false],
    ['[^]a]', 'b', true],
    ['[\\d-]+$', '12-3', true],
    ['[a-c\\s]+$', 'ab c', true],
    ['[\\w.-]+$', 'web-1.example', true],
    ['[*+?{]+$', '*+?{', true],
    // Unicode classes by default (str patterns), ASCII with (?a).
    ['\\d', '٣', true],
    ['(?a)\\d', '٣', false],
    ['\\w+$', 'héllo', true],
    ['(?a)\\w+$', 'héllo', false],
    ['\\s', '\u001c', true],
    ['\\s', '\ufeff', false],
    ['a\\b', 'a-', true],
    ['a\\b', 'ab', false],
    ['é\\b', 'éa', false],
    // Repeats: {,n}, a `{` that is no repeat is literal, lazy repeats.
    ['a{,2}b', 'aab', true],
    ['a{,2}b$', 'aaab', false],
    ['x{', 'x{', true],
    ['x{a}', 'x{a}', true],
    ['x{}', 'x{}', true],
    ['x{1,2', 'x{1,2', true],
    ['a{2}', 'aa', true],
    ['a+?b', 'aab', true],
    // Escapes.
    ['\\x41\\u00e9\\U0001F600', 'Aé😀', true],
    ['\\101\\0', 'A\0', true],
    ['\\a\\t', '\u0007\t', true],
    ['\\.\\-\\#', '.-#', true],
    ['😀+$', '😀😀', true],
    ['[😀-😂]', '😁', true],
    // Verbose mode, also when turned on mid-pattern; comments.
    ['(?x) w e b  # a comment\n \\d', 'web1', true],
    ['a b(?x)', 'ab', true],
    ['(?x)a\\ b', 'a b', true],
    ['(?x)[ ]', ' ', true],
    ['(?#a comment)web', 'web', true],
    // Look-arounds.
    ['web(?=\\d)', 'web1', true],
    ['web(?!\\d)', 'web1', false],
    ['.{3}(?<=eb)', 'web', true],
  ])('re.match(%j, %j) → %s', (pattern, text, matches) => {
    expect(rematch(pattern, text)).toBe(matches)
  })

  it('uses only the v flag, and i for IGNORECASE', () => {
    expect(translatePythonRegex('web').flags).toBe('v')
    expect(translatePythonRegex('(?i)web').flags).toBe('iv')
  })
})

describe('what Python refuses, or Brine cannot translate, is a RegexSyntaxError naming it', () => {
  it.each([
    ['web(', 'missing ), unterminated subpattern at position 3'],
    ['web)', 'unbalanced parenthesis at position 3'],
    ['*web', 'nothing to repeat at position 0'],
    ['^*', 'nothing to repeat at position 1'],
    ['a**', 'multiple repeat at position 2'],
    ['a*+', "multiple repeat (possessive quantifiers such as '*+' are not supported)"],
    ['a{3,2}', 'min repeat greater than max repeat'],
    ['[abc', 'unterminated character set at position 0'],
    ['[z-a]', 'bad character range z-a'],
    ['[\\d-z]', 'bad character range \\d-z'],
    ['\\q', 'bad escape \\q at position 0'],
    ['[\\A]', 'bad escape \\A'],
    ['\\x4', 'incomplete escape \\x4'],
    ['\\777', 'octal escape value \\777 outside of range 0-0o377'],
    ['\\1', 'invalid group reference 1'],
    ['(a)\\10', 'invalid group reference 10'],
    ['(a\\1)', 'cannot refer to an open group'],
    ['(?P=name)', "unknown group name 'name'"],
    ['(?P<n>a(?P=n))', 'cannot refer to an open group'],
    ['(?P<n>a)(?P<n>b)', "redefinition of group name 'n' as group 2; was group 1"],
    ['(?P<1a>x)', "bad character in group name '1a'"],
    ['(?P<n', 'missing >, unterminated name'],
    ['(?<n>a)', 'unknown extension ?<n (Python names a group with (?P<name>…))'],
    ['(?#open', 'missing ), unterminated comment'],
    ['(?(1)a|b)', 'conditional groups (?(…)…|…) are not supported'],
    ['(?>a+)', 'atomic groups (?>…) are not supported'],
    ['(?i:a)b', 'scoped case flags (?i:…) are not supported; put (?i) at the start to ignore case in the whole expression'],
    ['(?i)(?-i:a)', 'scoped case flags (?-i:…) are not supported'],
    ['(?L)a', "bad inline flags: cannot use 'L' flag with a str pattern"],
    ['(?au)a', "bad inline flags: flags 'a', 'u' and 'L' are incompatible"],
    ['(?-i)a', 'missing :'],
    ['(?z)a', 'unknown extension ?z'],
    ['(?iz)a', 'unknown flag'],
    ['\\N{DIGIT ONE}', 'named Unicode escapes \\N{…} are not supported'],
    ['(?=a)*', 'a repeated look-around assertion is not supported'],
    ['a\\', 'bad escape (end of pattern)'],
  ])('%j: %s', (pattern, problem) => {
    const attempt = (): unknown => translatePythonRegex(pattern)
    expect(attempt).toThrow(RegexSyntaxError)
    expect(attempt).toThrow(`bad regular expression '${pattern}': ${problem}`)
  })

  it('carries the pattern, the position and the problem', () => {
    try {
      translatePythonRegex('ab(?>c)')
      expect.unreachable()
    } catch (error) {
      expect(error).toMatchObject({ name: 'RegexSyntaxError', pattern: 'ab(?>c)', position: 2, problem: 'atomic groups (?>…) are not supported' })
    }
  })
})
