import { CryptCache, sealEncodedPublish, type SessionKey } from '@brine/crypt'
import { encode, type WireValue } from '@brine/core'
import type { RequestPool } from './worker-pool.js'

/**
 * The largest encoded publish sealed on the master's main thread. Below it the seal (a secretbox and one native
 * Ed25519 signature) costs this thread less than handing the load to a worker thread and taking the envelope back,
 * and it spares the job two thread wake-ups on its way out; above it the cipher's cost grows with the bytes and
 * a worker takes it.
 */
export const INLINE_SEAL_MAX_BYTES = 16 * 1024

export interface PublishSealerOptions {
  /** The request pool a large publish is sealed in (a pool of size 0 seals everything on this thread anyway). */
  pool: RequestPool
  /** The master's Ed25519 secret key. */
  signSecret: Uint8Array
  /** Encoded publishes up to this many bytes are sealed on this thread (default {@link INLINE_SEAL_MAX_BYTES}). */
  inlineMaxBytes?: number
}

/** What a {@link PublishSealer} has sealed where: on the calling thread, or handed to the pool. */
export interface PublishSealerStats {
  inline: number
  pooled: number
}

/**
 * Seals and signs job publishes: encodes each load once, seals a small one here and hands a large one's bytes to
 * the request pool (as an urgent task: the operator's job goes before peers' waiting requests).
 */
export class PublishSealer {
  readonly #pool: RequestPool
  readonly #signSecret: Uint8Array
  readonly #inlineMaxBytes: number
  /** The imported signing key and the nonce pool, for the seals made on this thread. */
  readonly #cache = new CryptCache({ publicKeys: 1, sharedKeys: 1, verifiedSignatures: 1, openedPublishes: 1 })
  readonly #stats: PublishSealerStats = { inline: 0, pooled: 0 }

  constructor(options: PublishSealerOptions) {
    this.#pool = options.pool
    this.#signSecret = options.signSecret
    this.#inlineMaxBytes = options.inlineMaxBytes ?? INLINE_SEAL_MAX_BYTES
  }

  async seal(jid: string, load: Record<string, unknown>, session: SessionKey): Promise<WireValue> {
    const encoded = encode(load as WireValue)
    if (encoded.length <= this.#inlineMaxBytes || this.#pool.size === 0) {
      this.#stats.inline++
      return sealEncodedPublish(encoded, session, this.#signSecret, this.#cache) as unknown as WireValue
    }
    this.#stats.pooled++
    return this.#pool.run(jid, { op: 'seal-publish', encoded, session }, { urgent: true })
  }

  stats(): PublishSealerStats {
    return { ...this.#stats }
  }
}
