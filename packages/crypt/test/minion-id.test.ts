import { describe, expect, it } from 'vitest'
import { InvalidMinionIdError, matchIds, validateMinionId } from '../src/index.js'

describe('validateMinionId', () => {
  it.each([
    ['', 'is empty'],
    ['.', 'relative path component'],
    ['..', 'relative path component'],
    ['../etc/passwd', 'path separator'],
    ['a/b', 'path separator'],
    ['/abs', 'path separator'],
    ['a\\b', 'path separator'],
    ['a\u0000b', 'NUL'],
    ['\n', 'control character'],
    ['web\t01', 'control character'],
    ['a\u007fb', 'control character'],
    ['a..b', "'..' sequence"],
    ['x'.repeat(300), '300 bytes long; the limit is 255'],
    ['é'.repeat(128), '256 bytes long'],
    ['a\uD800b', 'unpaired UTF-16 surrogate'],
  ])('rejects %j (%s)', (id, reason) => {
    const error = (() => {
      try {
        validateMinionId(id)
      } catch (e) {
        return e
      }
      return undefined
    })()
    expect(error).toBeInstanceOf(InvalidMinionIdError)
    expect((error as InvalidMinionIdError).message).toContain(reason)
    expect((error as InvalidMinionIdError).reason).toContain(reason)
    // The id is quoted JSON-escaped, so control characters cannot forge log lines.
    expect((error as InvalidMinionIdError).message).not.toContain('\n')
  })

  it.each(['web-01.example.com', 'minion_1', '-leading-dash', '.hidden', 'x'.repeat(255), 'naïve', 'db 01'])('accepts %j', (id) => {
    expect(() => validateMinionId(id)).not.toThrow()
  })

  it('rejects values that are not strings', () => {
    expect(() => validateMinionId(42)).toThrow(InvalidMinionIdError)
    expect(() => validateMinionId(null)).toThrow(/not a string/)
  })
})

describe('matchIds (salt-key globs)', () => {
  const ids = ['web1', 'web2', 'web10', 'db1', 'db-x', 'a[b', 'we.b']
  it.each([
    ['web?', ['web1', 'web2']],
    ['web*', ['web1', 'web2', 'web10']],
    ['*1', ['web1', 'db1']],
    ['web[12]', ['web1', 'web2']],
    ['web[!1]', ['web2']],
    ['db[-a]x', ['db-x']],
    ['a[b', ['a[b']],
    ['we.b', ['we.b']],
    ['db1', ['db1']],
    ['*', ids],
    ['nomatch*', []],
  ])('%s', (pattern, expected) => {
    expect(matchIds(ids, pattern).sort()).toEqual([...expected].sort())
  })

  it('takes a list of patterns', () => {
    expect(matchIds(ids, ['db1', 'web2'])).toEqual(['web2', 'db1'])
  })
})
