import { randomBytes } from 'node:crypto'
import nacl from 'tweetnacl'
import { isBytes, randomNonce, transcript } from './bytes.js'
import { DecryptError, MalformedMessageError, MasterKeyMismatchError, ReplayError, SignatureError } from './errors.js'
import { fingerprint, formatPublicKeys, normalizeFingerprint, publicKeysEqual, type KeyPair, type PublicKeys } from './keys.js'
import { MASTER_PIN_FILE, masterPinPath, pinMasterKeys, readPinnedMasterKeys } from './master-pin.js'
import { minionIdProblem } from './minion-id.js'
import type { KeyChange, PkiStore, SubmitResult } from './pki-store.js'
import { SESSION_KEY_BYTES, type SessionKey, type SessionKeys } from './session.js'
import { boxSharedKey } from './box.js'
import type { CryptCache } from './crypt-cache.js'
import { SIGNATURE_BYTES, signDetached, verifyDetached } from './sign.js'

/** Bytes of the random token a minion sends and the master must echo. */
export const AUTH_TOKEN_BYTES = 32

/** The `_auth` load a minion sends in the clear. Binary fields are Uint8Array (msgpack bin). */
export interface AuthRequest {
  cmd: '_auth'
  id: string
  pub: { box: Uint8Array; sign: Uint8Array }
  /** Random per attempt; the master's signed reply echoes it, so an old reply cannot be replayed. */
  token: Uint8Array
  /**
   * When it was signed, ms since the epoch, in the master's clock as far as the minion knows it (the
   * `time` of an earlier reply; its own clock before any). After `brine-key -d` only a request signed
   * after the deletion may be auto-accepted, so a recorded `_auth` replayed later cannot re-accept a key.
   */
  timestamp: number
  /** Minion's Ed25519 signature over id, keys, token and timestamp: proves it holds the sign key. */
  sig: Uint8Array
}

export type AuthRefusalReason = 'pending' | 'rejected' | 'denied' | 'bad signature' | 'invalid id' | 'malformed' | 'stale timestamp' | 'pending limit'

export interface AuthRefusal {
  ret: false
  reason: AuthRefusalReason
  message: string
  /** The master's clock (ms since the epoch), unsigned: a hint the minion stamps its next request with. */
  time?: number
}

/** The master's answer to an accepted minion. */
export interface AuthAcceptance {
  ret: true
  id: string
  /** The request's token, echoed. */
  token: Uint8Array
  gen: number
  nonce: Uint8Array
  /** The session key, sealed with `box` from the master to this minion. */
  session: Uint8Array
  master_pub: { box: Uint8Array; sign: Uint8Array }
  /** The master's clock when it answered (ms since the epoch): the minion's anchor for every freshness check. */
  time: number
  /**
   * The publish port of the transport this request arrived on (Salt's auth reply carries it too), so a
   * minion needs only `master` and `master_port`; 0 when the master did not say.
   */
  publish_port: number
  /** How long (ms) the minion may use this session before it must authenticate again; 0: no limit. */
  session_ttl: number
  /** Master's signature over everything above and the minion's box key. */
  sig: Uint8Array
}

export type AuthReply = AuthRefusal | AuthAcceptance

/** Data for Salt's `salt/auth` event (`pub` in the text form of a public key file). */
export interface AuthEvent {
  act: 'accept' | 'pend' | 'reject' | 'denied'
  id: string
  result: boolean
  pub: string
}

export interface AuthOutcome {
  reply: AuthReply
  /** Absent when the request was too malformed to name a minion. */
  event?: AuthEvent
  /** Key store changes, for `salt/key` events. */
  changes: KeyChange[]
  /** An accepted key was replaced (open_mode): the caller should rotate the session key. */
  rotateSession: boolean
  /**
   * On acceptance: the box key shared with the minion (`nacl.box.before` of its `pub.box` and the master's secret),
   * which sealing the session key needed anyway. The master's sealed channel keeps it for the minion's requests
   * instead of agreeing it a second time.
   */
  sharedKey?: Uint8Array
}

export interface HandleAuthOptions {
  /** Salt's `auto_accept` (default false). */
  autoAccept?: boolean
  /** Salt's `open_mode` (default false). */
  openMode?: boolean
  /**
   * Refuse requests whose timestamp is further than this from the master's clock. Off by default:
   * Salt minions need no synchronised clock, and a replayed request gains nothing, since the reply
   * is sealed to the minion's key and bound to the request's token.
   */
  maxClockSkewMs?: number
  /** The master's clock, ms since the epoch (default Date.now()): the reply's `time`. */
  now?: number
  /** The publish port to tell the minion (the one of the transport the request came in on); default 0, "not said". */
  publishPort?: number
  /** The session's lifetime to tell the minion, ms (the master's `publish_session`); default 0, no limit. */
  sessionTtlMs?: number
  /** Key objects, agreed keys and nonces (the master's request crypto owns one). */
  cache?: CryptCache
}

const REQUEST_TAG = 'brine/auth-request/v1'
const REPLY_TAG = 'brine/auth-reply/v2'

const requestTranscript = (r: Pick<AuthRequest, 'id' | 'pub' | 'token' | 'timestamp'>): Uint8Array =>
  transcript(REQUEST_TAG, r.id, r.pub.box, r.pub.sign, r.token, r.timestamp)

const replyTranscript = (r: Omit<AuthAcceptance, 'ret' | 'sig'>, minionBox: Uint8Array): Uint8Array =>
  transcript(REPLY_TAG, r.id, r.token, r.gen, r.nonce, r.session, r.master_pub.box, r.master_pub.sign, r.time, r.publish_port, r.session_ttl, minionBox)

/** Builds and signs a minion's `_auth` request. Keep it: {@link openAuthReply} checks the reply against it. */
export function buildAuthRequest(id: string, keys: KeyPair, now: number = Date.now(), cache?: CryptCache): AuthRequest {
  const unsigned = {
    id,
    pub: { box: keys.box.publicKey, sign: keys.sign.publicKey },
    token: new Uint8Array(randomBytes(AUTH_TOKEN_BYTES)),
    timestamp: now,
  }
  return { cmd: '_auth', ...unsigned, sig: signDetached(requestTranscript(unsigned), keys.sign.secretKey, cache) }
}

const refuse = (reason: AuthRefusalReason, message: string, time?: number): AuthRefusal =>
  time === undefined ? { ret: false, reason, message } : { ret: false, reason, message, time }

/** Checks a request's shape; returns a refusal message, or undefined when well formed. */
function requestProblem(request: unknown): string | undefined {
  if (typeof request !== 'object' || request === null) return 'request is not a map'
  const r = request as Partial<Record<keyof AuthRequest, unknown>>
  if (r.cmd !== '_auth') return "cmd is not '_auth'"
  if (typeof r.id !== 'string') return 'id is not a string'
  if (typeof r.pub !== 'object' || r.pub === null) return 'pub is not a map'
  const pub = r.pub as Record<string, unknown>
  if (!isBytes(pub.box, 32) || !isBytes(pub.sign, 32)) return 'pub.box and pub.sign must be 32 bytes each'
  if (!isBytes(r.token, AUTH_TOKEN_BYTES)) return `token is not ${AUTH_TOKEN_BYTES} bytes`
  if (typeof r.timestamp !== 'number' || !Number.isFinite(r.timestamp)) return 'timestamp is not a number'
  if (!isBytes(r.sig, SIGNATURE_BYTES)) return `sig is not ${SIGNATURE_BYTES} bytes`
  return undefined
}

/** An `_auth` request that passed every check needing no key store, with its public keys as text (for events). */
export interface CheckedAuth {
  request: AuthRequest
  pubText: string
}

/** {@link checkAuthRequest}'s answer: the checked request, or the outcome refusing it. */
export type AuthCheck = { ok: true; checked: CheckedAuth } | { ok: false; outcome: AuthOutcome }

/** An acceptance made for a checked request ({@link acceptAuth}), and the box key agreed to seal it. */
export interface AuthAcceptanceMade {
  reply: AuthAcceptance
  sharedKey: Uint8Array
}

/**
 * The checks of the master's `_auth` that need no key store: the request's shape, its id, its signature and, when
 * bounded, its clock skew. Never throws on what a peer sent: a failed check is the outcome to answer with.
 */
export function checkAuthRequest(request: unknown, options: Pick<HandleAuthOptions, 'maxClockSkewMs' | 'now' | 'cache'> = {}): AuthCheck {
  const none = { changes: [], rotateSession: false }
  const shape = requestProblem(request)
  if (shape !== undefined) return { ok: false, outcome: { reply: refuse('malformed', `malformed _auth request: ${shape}`), ...none } }
  const r = request as AuthRequest
  const idProblem = minionIdProblem(r.id)
  if (idProblem !== undefined) return { ok: false, outcome: { reply: refuse('invalid id', `invalid minion id: ${idProblem}`), ...none } }
  const pubText = formatPublicKeys(r.pub)
  if (!verifyDetached(r.sig, requestTranscript(r), r.pub.sign, options.cache)) {
    const event: AuthEvent = { act: 'reject', id: r.id, result: false, pub: pubText }
    return { ok: false, outcome: { reply: refuse('bad signature', '_auth request signature does not verify'), event, ...none } }
  }
  const now = options.now ?? Date.now()
  if (options.maxClockSkewMs !== undefined && Math.abs(now - r.timestamp) > options.maxClockSkewMs) {
    const message = `_auth timestamp is more than ${options.maxClockSkewMs} ms from the master's clock`
    return { ok: false, outcome: { reply: refuse('stale timestamp', message, now), ...none } }
  }
  return { ok: true, checked: { request: r, pubText } }
}

/** The master's acceptance of a checked request: the current session key sealed to the minion and its own public keys, signed. */
export function acceptAuth(
  r: AuthRequest,
  session: SessionKeys | SessionKey,
  masterKeys: KeyPair,
  options: Pick<HandleAuthOptions, 'now' | 'publishPort' | 'sessionTtlMs' | 'cache'> = {},
): AuthAcceptanceMade {
  const current = 'current' in session ? session.current() : session
  const nonce = randomNonce(nacl.box.nonceLength, options.cache)
  const sharedKey = boxSharedKey(r.pub.box, masterKeys.box.secretKey, options.cache)
  const unsigned = {
    id: r.id,
    token: r.token,
    gen: current.gen,
    nonce,
    session: nacl.box.after(current.key, nonce, sharedKey),
    master_pub: { box: masterKeys.box.publicKey, sign: masterKeys.sign.publicKey },
    time: options.now ?? Date.now(),
    publish_port: options.publishPort ?? 0,
    session_ttl: options.sessionTtlMs ?? 0,
  }
  const reply: AuthAcceptance = { ret: true, ...unsigned, sig: signDetached(replyTranscript(unsigned, r.pub.box), masterKeys.sign.secretKey, options.cache) }
  return { reply, sharedKey }
}

/** The refusal of an attempt the key store turned away at `max_pending_keys` (by name: a worker thread rebuilds errors as plain ones); undefined for any other error. */
export function pendingLimitOutcome(error: unknown, now: number): AuthOutcome | undefined {
  if ((error as Error)?.name !== 'PendingKeyLimitError') return undefined
  return { reply: refuse('pending limit', (error as Error).message, now), changes: [], rotateSession: false }
}

/**
 * The outcome of a checked request once the key store decided (Salt's rules: pending, accepted, rejected, denied on a
 * key mismatch): a refusal with its `salt/auth` event, or, accepted, `acceptance` (made for this request) answered.
 */
export function settleAuth(checked: CheckedAuth, submitted: SubmitResult, now: number, acceptance?: AuthAcceptanceMade): AuthOutcome {
  const base = { changes: submitted.changes, rotateSession: submitted.rotateSession }
  const event = (act: AuthEvent['act'], result: boolean): AuthEvent => ({ act, id: checked.request.id, result, pub: checked.pubText })
  switch (submitted.state) {
    case 'pending':
      return { reply: refuse('pending', 'key is pending acceptance on the master', now), event: event('pend', true), ...base }
    case 'rejected':
      return { reply: refuse('rejected', 'key has been rejected by the master', now), event: event('reject', false), ...base }
    case 'denied':
      return { reply: refuse('denied', 'key does not match the key the master has for this id', now), event: event('denied', false), ...base }
    case 'accepted':
      if (acceptance === undefined) throw new RangeError(`settleAuth: minion ${checked.request.id} was accepted, but no acceptance was made`)
      return { reply: acceptance.reply, event: event('accept', true), ...base, sharedKey: acceptance.sharedKey }
  }
}

/**
 * The master's `_auth`: validates the request, checks its signature, records the attempt in the
 * key store (Salt's rules: pending, accepted, rejected, denied on key mismatch) and, once the
 * minion is accepted, answers with the session key sealed to that minion and the master's public
 * keys, all signed. Never throws on what a peer sent; only store I/O errors propagate.
 */
export async function handleAuth(
  request: unknown,
  store: PkiStore,
  session: SessionKeys | SessionKey,
  masterKeys: KeyPair,
  options: HandleAuthOptions = {},
): Promise<AuthOutcome> {
  const check = checkAuthRequest(request, options)
  if (!check.ok) return check.outcome
  const r = check.checked.request
  const now = options.now ?? Date.now()
  let submitted: SubmitResult
  try {
    submitted = await store.submit(
      r.id,
      { box: r.pub.box, sign: r.pub.sign },
      { autoAccept: options.autoAccept ?? false, openMode: options.openMode ?? false, signedAt: r.timestamp },
    )
  } catch (error) {
    const refused = pendingLimitOutcome(error, now)
    if (refused === undefined) throw error
    return refused
  }
  const acceptance = submitted.state === 'accepted' ? acceptAuth(r, session, masterKeys, { ...options, now }) : undefined
  return settleAuth(check.checked, submitted, now, acceptance)
}

export type AuthResult =
  | {
      ok: true
      session: SessionKey
      masterPub: PublicKeys
      masterFinger: string
      firstContact: boolean
      /** The master's clock when it answered (signed, and bound to this request's token). */
      masterTime: number
      /** The master's publish port for this transport; undefined when it did not say. */
      publishPort: number | undefined
      /** How long the session may be used before authenticating again, ms; 0: no limit. */
      sessionTtlMs: number
    }
  /** `masterTime`: the refusal's unsigned hint of the master's clock, when it sent one. */
  | { ok: false; reason: string; message: string; masterTime?: number }

export interface OpenAuthReplyOptions {
  /** The master keys pinned at first contact; a reply with other keys is refused. */
  pinned?: PublicKeys
  /** Salt's `master_finger`: the master's fingerprint, pinned up front. */
  masterFinger?: string
  /** File the pin came from, named in MasterKeyMismatchError. */
  pinFile?: string
  /** Key objects and agreed keys (see {@link CryptCache}). */
  cache?: CryptCache
}

/**
 * The minion's side of `_auth`, without I/O: a refusal comes back as `{ok: false, reason}`
 * (pending is a normal state to wait in); an acceptance is checked against `master_finger` and
 * the pinned keys (MasterKeyMismatchError), its signature (SignatureError), the request it
 * answers (ReplayError) and the seal (DecryptError) before the session key is returned.
 */
export function openAuthReply(reply: unknown, request: AuthRequest, minionKeys: KeyPair, options: OpenAuthReplyOptions = {}): AuthResult {
  if (typeof reply !== 'object' || reply === null) throw new MalformedMessageError('auth reply', 'not a map')
  const r = reply as ReplyFields
  if (r.ret === false) return authRefusal(r)
  if (r.ret !== true) throw new MalformedMessageError('auth reply', 'ret is neither true nor false')
  const { acceptance, sig } = acceptanceOf(r)
  const keys = acceptance.master_pub
  const finger = fingerprint(keys)

  // Trust decisions first: an unknown master is refused before anything it sent is used.
  if (options.masterFinger !== undefined && normalizeFingerprint(options.masterFinger) !== normalizeFingerprint(finger)) {
    throw new MasterKeyMismatchError('master_finger', options.masterFinger, finger)
  }
  if (options.pinned !== undefined && !publicKeysEqual(options.pinned, keys)) {
    throw new MasterKeyMismatchError('pinned', fingerprint(options.pinned), finger, options.pinFile)
  }
  if (!verifyDetached(sig, replyTranscript(acceptance, minionKeys.box.publicKey), keys.sign, options.cache)) {
    throw new SignatureError('auth reply', "signature does not verify with the master's key")
  }
  if (acceptance.id !== request.id) throw new ReplayError('auth reply', `answers minion ${JSON.stringify(acceptance.id)}, not ${JSON.stringify(request.id)}`)
  if (Buffer.compare(acceptance.token, request.token) !== 0) throw new ReplayError('auth reply', 'token does not match the request')
  const key = nacl.box.open.after(acceptance.session, acceptance.nonce, boxSharedKey(keys.box, minionKeys.box.secretKey, options.cache))
  if (key === null || key.length !== SESSION_KEY_BYTES) throw new DecryptError('auth reply session key', "does not open with this minion's key")
  return {
    ok: true,
    session: { key, gen: acceptance.gen },
    masterPub: keys,
    masterFinger: finger,
    firstContact: options.pinned === undefined,
    masterTime: acceptance.time,
    publishPort: acceptance.publish_port === 0 ? undefined : acceptance.publish_port,
    sessionTtlMs: acceptance.session_ttl,
  }
}

/** An auth reply's fields as they came off the wire, nothing checked yet. */
type ReplyFields = Partial<Record<keyof AuthAcceptance | 'reason' | 'message', unknown>>

/** A refusal (`ret: false`): unsigned text from the network, kept short and printable before it reaches a log. */
function authRefusal(r: ReplyFields): AuthResult {
  const printable = (value: unknown, fallback: string): string =>
    typeof value === 'string' ? value.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?').slice(0, 200) : fallback
  const reason = printable(r.reason, 'refused')
  const message = printable(r.message, `master refused authentication: ${reason}`)
  return typeof r.time === 'number' && Number.isFinite(r.time) ? { ok: false, reason, message, masterTime: r.time } : { ok: false, reason, message }
}

/** An acceptance's fields, each checked for its type and size (MalformedMessageError naming the first that is not). */
function acceptanceOf(r: ReplyFields): { acceptance: Omit<AuthAcceptance, 'ret' | 'sig'>; sig: Uint8Array } {
  const malformed = (problem: string): never => {
    throw new MalformedMessageError('auth reply', problem)
  }
  const masterPub = r.master_pub as { box?: unknown; sign?: unknown } | undefined
  if (typeof masterPub !== 'object' || masterPub === null || !isBytes(masterPub.box, 32) || !isBytes(masterPub.sign, 32)) {
    return malformed('master_pub.box and master_pub.sign must be 32 bytes each')
  }
  if (typeof r.id !== 'string') malformed('id is not a string')
  if (!isBytes(r.token, AUTH_TOKEN_BYTES)) malformed(`token is not ${AUTH_TOKEN_BYTES} bytes`)
  if (typeof r.gen !== 'number' || !Number.isSafeInteger(r.gen)) malformed('gen is not an integer')
  if (!isBytes(r.nonce, nacl.box.nonceLength)) malformed(`nonce is not ${nacl.box.nonceLength} bytes`)
  if (!isBytes(r.session)) malformed('session is not bytes')
  if (typeof r.time !== 'number' || !Number.isFinite(r.time)) malformed('time is not a number')
  const port = r.publish_port
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) malformed('publish_port is not a port number')
  if (typeof r.session_ttl !== 'number' || !Number.isFinite(r.session_ttl) || r.session_ttl < 0) malformed('session_ttl is not a non-negative number')
  if (!isBytes(r.sig, SIGNATURE_BYTES)) malformed(`sig is not ${SIGNATURE_BYTES} bytes`)
  const checked = r as Required<Pick<AuthAcceptance, 'id' | 'token' | 'gen' | 'nonce' | 'session' | 'time' | 'publish_port' | 'session_ttl' | 'sig'>>
  const keys: PublicKeys = { box: masterPub.box, sign: masterPub.sign }
  const { id, token, gen, nonce, session, time, publish_port, session_ttl, sig } = checked
  return { acceptance: { id, token, gen, nonce, session, master_pub: keys, time, publish_port, session_ttl }, sig }
}

export interface AcceptAuthReplyOptions {
  /** The minion's pki_dir, where `minion_master.pub` lives. */
  pkiDir: string
  masterFinger?: string
  /** Pin file name (default `minion_master.pub`); multi-master minions use one per master ({@link masterPinFile}). */
  pinFile?: string
  cache?: CryptCache
}

/** {@link openAuthReply} with the pin read from, and on first contact written to, `pki_dir`. */
export async function acceptAuthReply(reply: unknown, request: AuthRequest, minionKeys: KeyPair, options: AcceptAuthReplyOptions): Promise<AuthResult> {
  const pinFile = options.pinFile ?? MASTER_PIN_FILE
  const pinned = await readPinnedMasterKeys(options.pkiDir, pinFile)
  const result = openAuthReply(reply, request, minionKeys, {
    ...(pinned === undefined ? {} : { pinned }),
    ...(options.masterFinger === undefined ? {} : { masterFinger: options.masterFinger }),
    pinFile: masterPinPath(options.pkiDir, pinFile),
    ...(options.cache === undefined ? {} : { cache: options.cache }),
  })
  if (result.ok && result.firstContact) await pinMasterKeys(options.pkiDir, result.masterPub, pinFile)
  return result
}
