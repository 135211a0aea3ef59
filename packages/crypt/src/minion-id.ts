import { InvalidMinionIdError } from './errors.js'
import { TEMP_NAME_EXTRA_BYTES } from './fs-atomic.js'

/** Longest file name on the filesystems Brine runs on (NAME_MAX of ext4, xfs, btrfs, tmpfs). */
export const NAME_MAX_BYTES = 255

/**
 * Longest minion id in UTF-8 bytes. An id is a file name in the master's key store, and every
 * key file is written through a temporary file whose name adds {@link TEMP_NAME_EXTRA_BYTES}
 * (18) bytes, so an id longer than 237 bytes would pass a 255-byte check and then fail with
 * ENAMETOOLONG half-way through accepting it.
 */
export const MAX_MINION_ID_BYTES = NAME_MAX_BYTES - TEMP_NAME_EXTRA_BYTES

// C0 controls, DEL and C1 controls; NUL is reported on its own below.
const CONTROL = /[\u0001-\u001f\u007f-\u009f]/
// Lone UTF-16 surrogates: they become U+FFFD in a file name, so two ids could share one file.
const LONE_SURROGATE = /\p{Cs}/u
// Characters that draw nothing or reorder what follows: zero-width spaces and joiners, the
// byte-order mark, bidirectional overrides and isolates, soft hyphens, variation selectors, fillers.
// Two ids differing only by one of these print the same in `brine-key -L`.
const INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}\p{Zl}\p{Zp}]/u
// Spaces other than U+0020 (no-break, ideographic, en/em spaces): they look like a plain space.
const ODD_SPACE = /(?! )\p{Zs}/u

/** `U+202E`: how a refused or suspicious character is named in a message. */
const codePoint = (char: string): string => `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`

/**
 * The one id rule, shared by the master (before an id touches a path: `_auth`, the key store, the
 * caches) and the minion (its own id, at start). Why `id` cannot be a minion id, or undefined when
 * it can. Follows Salt's `salt.utils.verify.valid_id` (no `/`, `\` or NUL, and the path must stay
 * inside pki_dir) and goes further:
 * - at most {@link MAX_MINION_ID_BYTES} UTF-8 bytes, counted with the temporary file's suffix;
 * - no `..` anywhere, no control characters, no unpaired surrogates;
 * - Unicode NFC only (a minion normalises its own id with {@link normalizeMinionId}), so `é` as one
 *   code point and as `e` + combining accent cannot be two keys;
 * - nothing invisible or direction-changing (zero-width characters, bidi overrides, fillers) and no
 *   space other than U+0020, so no two ids print alike. Look-alike letters from another script are
 *   allowed (many fleets name hosts in their own script) and flagged by {@link mixedScripts}.
 * A leading `-` or `.` is allowed, as Salt allows it; callers never pass ids to a shell.
 */
export function minionIdProblem(id: unknown): string | undefined {
  if (typeof id !== 'string') return `is a ${id === null ? 'null' : typeof id}, not a string`
  if (id === '') return 'is empty'
  const bytes = Buffer.byteLength(id, 'utf8')
  if (bytes > MAX_MINION_ID_BYTES) {
    return `is ${bytes} bytes long; the limit is ${MAX_MINION_ID_BYTES} (a file name of at most ${NAME_MAX_BYTES} bytes with its temporary suffix)`
  }
  if (id === '.' || id === '..') return 'is a relative path component'
  if (id.includes('/') || id.includes('\\')) return 'contains a path separator'
  if (id.includes('\u0000')) return 'contains a NUL byte'
  if (id.includes('..')) return "contains a '..' sequence"
  if (CONTROL.test(id)) return 'contains a control character'
  if (LONE_SURROGATE.test(id)) return 'contains an unpaired UTF-16 surrogate'
  const invisible = INVISIBLE.exec(id)
  if (invisible !== null) return `contains an invisible or direction-changing character (${codePoint(invisible[0])})`
  const space = ODD_SPACE.exec(id)
  if (space !== null) return `contains a space character other than U+0020 (${codePoint(space[0])})`
  if (id.normalize('NFC') !== id) return 'is not in Unicode normalization form C (NFC); minions normalise their own id'
  return undefined
}

export const isValidMinionId = (id: unknown): id is string => minionIdProblem(id) === undefined

/** Throws InvalidMinionIdError (naming the id, JSON-escaped, and the reason) unless `id` is safe as a file name. */
export function validateMinionId(id: unknown): asserts id is string {
  const problem = minionIdProblem(id)
  if (problem !== undefined) throw new InvalidMinionIdError(typeof id === 'string' ? id : String(id), problem)
}

/**
 * A minion's own id as it authenticates: Unicode NFC, so a config file saved decomposed (`e` +
 * U+0301) names the same key as one saved composed (`é`). Anything else is left alone for
 * {@link validateMinionId} to judge; key globs are normalised the same way before matching.
 */
export function normalizeMinionId<T>(id: T): T {
  return (typeof id === 'string' ? id.normalize('NFC') : id) as T
}

// The scripts a look-alike id is usually built from; a letter of any other script counts as 'Other'.
const SCRIPTS = [
  'Latin',
  'Greek',
  'Cyrillic',
  'Armenian',
  'Hebrew',
  'Arabic',
  'Syriac',
  'Thaana',
  'Devanagari',
  'Bengali',
  'Gurmukhi',
  'Gujarati',
  'Tamil',
  'Telugu',
  'Kannada',
  'Malayalam',
  'Thai',
  'Lao',
  'Tibetan',
  'Georgian',
  'Hangul',
  'Ethiopic',
  'Cherokee',
  'Hiragana',
  'Katakana',
  'Bopomofo',
  'Han',
] as const
const SCRIPT_TESTS = SCRIPTS.map((name) => [name, new RegExp(`\\p{Script=${name}}`, 'u')] as const)
/** Digits, punctuation and combining marks belong to no one script. */
const NEUTRAL = /[\p{Script=Common}\p{Script=Inherited}]/u
/** UTS #39's "highly restrictive" combinations: what CJK writing mixes on purpose. */
const ALLOWED_MIXES: ReadonlyArray<ReadonlySet<string>> = [
  new Set(['Latin', 'Han', 'Hiragana', 'Katakana']),
  new Set(['Latin', 'Han', 'Bopomofo']),
  new Set(['Latin', 'Han', 'Hangul']),
]

/** The scripts of `id`'s letters, in order of first appearance (digits and punctuation count for none). */
export function idScripts(id: string): string[] {
  const found: string[] = []
  for (const char of id) {
    if (NEUTRAL.test(char)) continue
    const script = SCRIPT_TESTS.find(([, test]) => test.test(char))?.[0] ?? 'Other'
    if (!found.includes(script)) found.push(script)
  }
  return found
}

/**
 * The scripts of `id` when it mixes them the way a look-alike does (`wеb1` with a Cyrillic `е`:
 * Latin and Cyrillic), or undefined. Single-script ids and UTS #39's highly restrictive mixes
 * (Latin with Han and kana, Bopomofo or Hangul) are not flagged. `brine-key` warns about these.
 */
export function mixedScripts(id: string): string[] | undefined {
  const scripts = idScripts(id)
  if (scripts.length < 2) return undefined
  if (ALLOWED_MIXES.some((allowed) => scripts.every((script) => allowed.has(script)))) return undefined
  return scripts
}

/** `id` with every non-ASCII character written as `\u{…}`, so a look-alike shows what it is made of. */
export function escapeNonAscii(id: string): string {
  let out = ''
  for (const char of id) out += /^[\x20-\x7e]$/.test(char) ? char : `\\u{${(char.codePointAt(0) ?? 0).toString(16)}}`
  return out
}
