import { InvalidMinionIdError } from './errors.js'

/** Longest minion id in UTF-8 bytes: a file name on every common filesystem. */
export const MAX_MINION_ID_BYTES = 255

// C0 controls, DEL and C1 controls; NUL is reported on its own below.
const CONTROL = /[\u0001-\u001f\u007f-\u009f]/
// Lone UTF-16 surrogates: they become U+FFFD in a file name, so two ids could share one file.
const LONE_SURROGATE = /\p{Cs}/u

/**
 * Why `id` cannot be a minion id, or undefined when it can. Follows Salt's
 * `salt.utils.verify.valid_id` (no `/`, `\` or NUL, and the path must stay inside pki_dir) and
 * goes further: no `..` anywhere, no control characters, at most 255 UTF-8 bytes. A leading `-`
 * or `.` is allowed, as Salt allows it; callers never pass ids to a shell.
 */
export function minionIdProblem(id: unknown): string | undefined {
  if (typeof id !== 'string') return `is a ${id === null ? 'null' : typeof id}, not a string`
  if (id === '') return 'is empty'
  const bytes = Buffer.byteLength(id, 'utf8')
  if (bytes > MAX_MINION_ID_BYTES) return `is ${bytes} bytes long; the limit is ${MAX_MINION_ID_BYTES}`
  if (id === '.' || id === '..') return 'is a relative path component'
  if (id.includes('/') || id.includes('\\')) return 'contains a path separator'
  if (id.includes('\u0000')) return 'contains a NUL byte'
  if (id.includes('..')) return "contains a '..' sequence"
  if (CONTROL.test(id)) return 'contains a control character'
  if (LONE_SURROGATE.test(id)) return 'contains an unpaired UTF-16 surrogate'
  return undefined
}

export const isValidMinionId = (id: unknown): id is string => minionIdProblem(id) === undefined

/** Throws InvalidMinionIdError (naming the id, JSON-escaped, and the reason) unless `id` is safe as a file name. */
export function validateMinionId(id: unknown): asserts id is string {
  const problem = minionIdProblem(id)
  if (problem !== undefined) throw new InvalidMinionIdError(typeof id === 'string' ? id : String(id), problem)
}
