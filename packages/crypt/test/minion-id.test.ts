import { describe, expect, it } from 'vitest'
import {
  escapeNonAscii,
  idScripts,
  InvalidMinionIdError,
  MAX_MINION_ID_BYTES,
  matchIds,
  minionIdProblem,
  mixedScripts,
  normalizeMinionId,
  PkiStore,
  generateKeys,
  publicKeysOf,
  validateMinionId,
} from '../src/index.js'
import { useTempDirs } from './temp-dir.js'

const tempDir = useTempDirs()

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
    ['x'.repeat(300), '300 bytes long; the limit is 237'],
    ['x'.repeat(238), '238 bytes long; the limit is 237 (a file name of at most 255 bytes with its temporary suffix)'],
    ['x'.repeat(255), '255 bytes long'],
    ['é'.repeat(119), '238 bytes long'],
    ['a\uD800b', 'unpaired UTF-16 surrogate'],
    // Look-alikes that print the same as another id: invisible, direction-changing, odd spaces, decomposed.
    ['web\u200b1', 'invisible or direction-changing character (U+200B)'],
    ['web\u200d1', 'U+200D'],
    ['\ufeffweb1', 'U+FEFF'],
    ['web1\u202egnp.exe', 'U+202E'],
    ['web\u2066x\u2069', 'U+2066'],
    ['web\u00ad1', 'U+00AD'],
    ['web\u3164', 'U+3164'],
    ['web\u00a01', 'space character other than U+0020 (U+00A0)'],
    ['web\u30001', 'U+3000'],
    ['web\u20281', 'U+2028'],
    ['cafe\u0301', 'normalization form C (NFC)'],
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

  it.each([
    'web-01.example.com',
    'minion_1',
    '-leading-dash',
    '.hidden',
    'x'.repeat(237),
    'é'.repeat(118),
    'naïve',
    'café',
    'db 01',
    'wеb1',
    'сервер-1',
    '東京-web',
  ])('accepts %j', (id) => {
    expect(() => validateMinionId(id)).not.toThrow()
  })

  it('rejects values that are not strings', () => {
    expect(() => validateMinionId(42)).toThrow(InvalidMinionIdError)
    expect(() => validateMinionId(null)).toThrow(/not a string/)
  })
})

describe('the id length is counted with the temporary file suffix', () => {
  it('a key store holds an id of exactly the limit, through its temporary file, and refuses one byte more without touching a path', async () => {
    expect(MAX_MINION_ID_BYTES).toBe(237)
    const store = await PkiStore.open(await tempDir())
    const longest = 'm'.repeat(MAX_MINION_ID_BYTES)
    await expect(store.submit(longest, publicKeysOf(generateKeys()), { autoAccept: true })).resolves.toMatchObject({ state: 'accepted' })
    expect((await store.list()).minions).toEqual([longest])
    const error = await store.submit(`${longest}m`, publicKeysOf(generateKeys())).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(InvalidMinionIdError)
    // The reason names the limit, never a server path (the old failure was a raw ENAMETOOLONG with the key file's path).
    expect((error as Error).message).toContain('the limit is 237')
    expect((error as Error).message).not.toContain(store.pkiDir)
  })
})

describe('Unicode ids', () => {
  it('normalises to NFC, so a decomposed id becomes the composed one the rule accepts', () => {
    const decomposed = 'cafe\u0301'
    expect(minionIdProblem(decomposed)).toContain('NFC')
    expect(normalizeMinionId(decomposed)).toBe('café')
    expect(minionIdProblem(normalizeMinionId(decomposed))).toBeUndefined()
    expect(normalizeMinionId(42)).toBe(42)
  })

  it.each([
    ['web1', undefined],
    ['сервер', undefined],
    ['web-01.example.com', undefined],
    ['東京タワー-web', undefined],
    ['서울-web', undefined],
    ['wеb1', ['Latin', 'Cyrillic']],
    ['pаypal', ['Latin', 'Cyrillic']],
    ['αpi-web', ['Greek', 'Latin']],
    ['web\u13a01', ['Latin', 'Cherokee']],
  ])('mixedScripts(%j) is %j', (id, scripts) => {
    expect(mixedScripts(id)).toEqual(scripts)
  })

  it('names the scripts of letters only, and spells non-ASCII characters out', () => {
    expect(idScripts('web-01.example')).toEqual(['Latin'])
    expect(idScripts('42-_.')).toEqual([])
    expect(escapeNonAscii('wеb1')).toBe('w\\u{435}b1')
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

  it('matches a pattern that names an existing id literally, and as a glob otherwise', () => {
    const keys = ['x1', 'x[1]', 'y1', 'web*', 'web1']
    expect(matchIds(keys, 'x[1]')).toEqual(['x[1]'])
    expect(matchIds(keys, 'y[1]')).toEqual(['y1'])
    expect(matchIds(keys, 'web*')).toEqual(['web*'])
    expect(matchIds(keys, 'web?')).toEqual(['web*', 'web1'])
    // The names known in other states count too: `x[1]` pending keeps `x[1]` from reaching an accepted `x1`.
    expect(matchIds(['x1'], 'x[1]', ['x1', 'x[1]'])).toEqual([])
    expect(matchIds(['x1'], 'x[1]', ['x1'])).toEqual(['x1'])
    // Patterns are compared in NFC, as ids are stored.
    expect(matchIds(['café'], 'cafe\u0301')).toEqual(['café'])
  })
})
