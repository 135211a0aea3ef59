/**
 * @packageDocumentation
 * `@brine/crypt` is Brine's security core (DESIGN §3), a library with no sockets: master and minion
 * key pairs (X25519 `box`, Ed25519 `sign`) in `pki_dir`, the master's key store with Salt's states
 * (`minions_pre`, `minions`, `minions_rejected`, `minions_denied`), the `_auth` handshake with master
 * key pinning, session keys that seal and sign every publish, per-minion sealed requests so one
 * minion cannot forge another's return, a replay guard that applies each sealed request once inside a
 * time window, and the local client's root key. It holds no process-wide
 * state: what is worth remembering between calls (imported key objects, agreed keys, verified
 * signatures, opened publishes, a nonce pool) lives in a `CryptCache` its caller owns and passes in.
 */
export {
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
  type StaleRequestReason,
} from './errors.js'
export {
  minionIdProblem,
  isValidMinionId,
  validateMinionId,
  normalizeMinionId,
  idScripts,
  mixedScripts,
  escapeNonAscii,
  MAX_MINION_ID_BYTES,
  NAME_MAX_BYTES,
} from './minion-id.js'
export { TEMP_NAME_EXTRA_BYTES } from './fs-atomic.js'
export { matchIds } from './glob.js'
export {
  generateKeys,
  keysFromSecrets,
  publicKeysOf,
  publicKeysEqual,
  fingerprint,
  normalizeFingerprint,
  formatPublicKeys,
  parsePublicKeys,
  formatSecretKeys,
  parseSecretKeys,
  loadOrCreateKeys,
  KEY_FILE_MODE,
  PUBLIC_FILE_MODE,
  PKI_DIR_MODE,
  type BoxKeyPair,
  type SignKeyPair,
  type KeyPair,
  type PublicKeys,
  type LoadedKeys,
  type LoadKeysOptions,
} from './keys.js'
export { signDetached, verifyDetached, verifyDetachedCached, SIGNATURE_BYTES } from './sign.js'
export { CryptCache, type CryptCacheOptions, type CryptCacheStats, type OpenedPublish } from './crypt-cache.js'
export * from './pki-store.js'
export * from './session.js'
export * from './session-store.js'
export * from './box.js'
export * from './master-pin.js'
export * from './auth.js'
export * from './root-key.js'
export * from './root-key-file.js'
export { writeFileAtomic, createFileExclusive, isNotFound, type AtomicWriteOptions } from './fs-atomic.js'
export { DUPLICATE, REPLAY_NONCE_BYTES, ReplayGuard, type ReplayGuardOptions, type ReplayGuardStats, type ReplayVerdict } from './replay-guard.js'
