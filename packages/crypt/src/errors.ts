import { BrineError, registerErrors, type ErrorContext } from '@brine/core'

/**
 * Typed errors of `@brine/crypt`. Names are string literals (bundlers rename classes); context
 * carries the file, id or generation involved so a log line says what to fix. Nothing secret
 * (key bytes, session keys) ever goes into a message or context.
 */

/** Longest excerpt of peer-supplied text quoted in a message, so a hostile id cannot flood a log. */
const QUOTE_LIMIT = 80

/** JSON-escapes and truncates text that came from a peer or a file name. */
export function quote(value: string): string {
  const cut = value.length > QUOTE_LIMIT ? `${value.slice(0, QUOTE_LIMIT)}…` : value
  return JSON.stringify(cut)
}

/** Base of every error raised by `@brine/crypt`. */
export class CryptError extends BrineError {
  override name: string = 'CryptError'
  constructor(message: string, context: ErrorContext = {}, options?: ErrorOptions) {
    super(message, context, options)
  }
}

/** A key file is missing a part, truncated, corrupt, or disagrees with its partner file. */
export class KeyFileError extends CryptError {
  override name = 'KeyFileError'
  readonly file: string
  readonly reason: string
  constructor(file: string, reason: string, options?: ErrorOptions) {
    super(`key file ${file}: ${reason}`, { file, reason }, options)
    this.file = file
    this.reason = reason
  }
}

/** A secret key file readable or writable by group or others; refused, as ssh refuses such keys. */
export class InsecureKeyFileError extends CryptError {
  override name = 'InsecureKeyFileError'
  readonly file: string
  readonly mode: string
  constructor(file: string, mode: number) {
    const octal = `0${(mode & 0o777).toString(8)}`
    super(`key file ${file} has mode ${octal}; secret keys must be private to their owner (chmod 600 ${file})`, {
      file,
      mode: octal,
    })
    this.file = file
    this.mode = octal
  }
}

/** The master's session key file (`<pki_dir>/.session_key`) cannot be read, or is not what it writes. */
export class SessionFileError extends CryptError {
  override name = 'SessionFileError'
  readonly file: string
  readonly reason: string
  constructor(file: string, reason: string, options?: ErrorOptions) {
    super(`session key file ${file}: ${reason}`, { file, reason }, options)
    this.file = file
    this.reason = reason
  }
}

/** A minion id that must not become a file name: checked before any path is built. */
export class InvalidMinionIdError extends CryptError {
  override name = 'InvalidMinionIdError'
  readonly id: string
  readonly reason: string
  constructor(id: string, reason: string) {
    super(`invalid minion id ${quote(id)}: ${reason}`, { id: id.slice(0, QUOTE_LIMIT), reason })
    this.id = id
    this.reason = reason
  }
}

/** A message, auth request or reply whose signature does not verify. */
export class SignatureError extends CryptError {
  override name = 'SignatureError'
  readonly what: string
  constructor(what: string, detail = 'signature does not verify') {
    super(`${what}: ${detail}`, { what })
    this.what = what
  }
}

/** A ciphertext that does not open with the key at hand (tampered, or sealed with another key). */
export class DecryptError extends CryptError {
  override name = 'DecryptError'
  readonly what: string
  constructor(what: string, detail = 'does not decrypt with the expected key') {
    super(`${what}: ${detail}`, { what })
    this.what = what
  }
}

/** A publish sealed under another session key generation: the minion must re-authenticate. */
export class StaleSessionKeyError extends CryptError {
  override name = 'StaleSessionKeyError'
  readonly gen: number
  readonly expected: number
  constructor(gen: number, expected: number) {
    super(`publish sealed with session key generation ${gen}, this side holds ${expected}; re-authenticate`, {
      gen,
      expected,
    })
    this.gen = gen
    this.expected = expected
  }
}

/** The master's public keys differ from the pinned ones or from `master_finger`. */
export class MasterKeyMismatchError extends CryptError {
  override name = 'MasterKeyMismatchError'
  readonly expected: string
  readonly actual: string
  readonly source: 'pinned' | 'master_finger'
  constructor(source: 'pinned' | 'master_finger', expected: string, actual: string, file?: string) {
    const against = source === 'pinned' ? `the pinned key${file === undefined ? '' : ` in ${file}`}` : 'master_finger'
    super(
      `master public key ${actual} does not match ${against} (${expected}); refusing this master. ` +
        'If the master key really changed, remove the pinned key file or update master_finger.',
      { source, expected, actual, file },
    )
    this.expected = expected
    this.actual = actual
    this.source = source
  }
}

/** A message that is not the shape the protocol defines (missing field, wrong length, wrong type). */
export class MalformedMessageError extends CryptError {
  override name = 'MalformedMessageError'
  readonly what: string
  readonly reason: string
  constructor(what: string, reason: string, options?: ErrorOptions) {
    super(`malformed ${what}: ${reason}`, { what, reason }, options)
    this.what = what
    this.reason = reason
  }
}

/** An auth reply that does not answer this request (another token or id): stale or replayed. */
export class ReplayError extends CryptError {
  override name = 'ReplayError'
  readonly what: string
  constructor(what: string, reason: string) {
    super(`${what}: ${reason} (stale or replayed)`, { what, reason })
    this.what = what
  }
}

/** A sealed request claiming to come from a minion whose key is not accepted. */
export class MinionNotAcceptedError extends CryptError {
  override name = 'MinionNotAcceptedError'
  readonly id: string
  constructor(id: string) {
    super(`minion ${quote(id)} has no accepted key; its sealed message is refused`, { id: id.slice(0, QUOTE_LIMIT) })
    this.id = id
  }
}

/** The local client's root key file is missing, empty, or readable by others. */
export class RootKeyError extends CryptError {
  override name = 'RootKeyError'
  readonly file: string
  constructor(file: string, reason: string, options?: ErrorOptions) {
    super(`root key ${file}: ${reason}`, { file, reason }, options)
    this.file = file
  }
}

/** Why a sealed request was refused as stale: outside the time window, at or below the replay floor, or sealed before the master started. */
export type StaleRequestReason = 'window' | 'floor' | 'start'

/**
 * A sealed minion request whose timestamp is outside the master's window (`request_window`), or no newer
 * than the oldest request the master had to forget for that minion (its nonce memory was full). The
 * minion re-seals it with a fresh timestamp and nonce, re-authenticating first if its clock anchor is old.
 */
export class StaleRequestError extends CryptError {
  override name = 'StaleRequestError'
  readonly id: string
  readonly timestamp: number
  readonly now: number
  readonly reason: StaleRequestReason
  constructor(id: string, timestamp: number, now: number, reason: StaleRequestReason, limit: number) {
    const sealed = Number.isFinite(timestamp) ? new Date(timestamp).toISOString() : String(timestamp)
    const detail =
      reason === 'window'
        ? `${Math.round(timestamp - now)} ms from the master's clock (${new Date(now).toISOString()}), outside the window of ±${limit} ms (request_window)`
        : reason === 'floor'
          ? `no newer than a request already forgotten (${new Date(limit).toISOString()}: the nonce memory for this minion was full)`
          : `no newer than the master's start (${new Date(limit).toISOString()}), before which it remembers no request`
    super(`sealed request from minion ${quote(id)} sealed at ${sealed} is ${detail}; re-seal it with a fresh timestamp`, {
      id: id.slice(0, QUOTE_LIMIT),
      timestamp,
      now,
      reason,
      limit,
    })
    this.id = id
    this.timestamp = timestamp
    this.now = now
    this.reason = reason
  }
}

/**
 * A new key would take `minions_pre` past `max_pending_keys`: the `_auth` is refused and nothing is
 * written, so a client inventing ids cannot fill the disk, the master's memory or `brine-key -L`.
 */
export class PendingKeyLimitError extends CryptError {
  override name = 'PendingKeyLimitError'
  readonly id: string
  readonly limit: number
  constructor(id: string, limit: number) {
    super(`key of minion ${quote(id)} not recorded: ${limit} keys are pending already (max_pending_keys); accept, reject or delete some (brine-key -L)`, {
      id: id.slice(0, QUOTE_LIMIT),
      limit,
    })
    this.id = id
    this.limit = limit
  }
}

registerErrors({
  CryptError,
  KeyFileError,
  InsecureKeyFileError,
  SessionFileError,
  InvalidMinionIdError,
  SignatureError,
  DecryptError,
  StaleSessionKeyError,
  MasterKeyMismatchError,
  MalformedMessageError,
  ReplayError,
  MinionNotAcceptedError,
  RootKeyError,
  StaleRequestError,
  PendingKeyLimitError,
})
