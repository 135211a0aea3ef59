/**
 * What one kept answer counts beside its reply's bytes: its record, its slot in the order, the peer's map entry and the
 * reply's Buffer object and backing store, as a master holds them after a burst (docs/performance.md, "What the kept
 * answers hold"); counted lower, the kept answers held twice their budget.
 */
export const ANSWER_OVERHEAD_BYTES = 480

/**
 * zlib's CRC-32, with Node's zlib module loaded at the first answer kept rather than with this module: only a serving
 * process keeps answers, and every process that loads the transport (a minion, a command) would otherwise pay zlib's
 * code for it.
 */
let zlibCrc32: ((data: Buffer) => number) | undefined
function crc32(data: Buffer): number {
  zlibCrc32 ??= process.getBuiltinModule('node:zlib').crc32
  return zlibCrc32(data)
}

/** Replies larger than this are not kept: a retry of such a request (a file chunk) is served again, as before. */
export const ANSWER_KEPT_MAX_BYTES = 4096

interface Answer<P> {
  peer: P
  id: number
  /** The request's length and checksum: a try is the same bytes again, a new request under a reused id is not. */
  length: number
  checksum: number
  reply: Buffer
}

/**
 * The last replies a server sent, by peer and request id, within `maxBytes` (oldest forgotten first): a try that comes
 * again after its request was answered (it waited in the peer's socket, or in the server's, behind a burst, while its
 * sender's timer ran out) is answered with the same reply bytes, instead of being served again, which would open,
 * check and answer it a second time only to find it done. Only a request with the same bytes matches (its length and
 * CRC-32), and only from the same peer: the reply goes back where the first one went.
 */
export class AnsweredReplies<P> {
  readonly #byPeer = new Map<P, Map<number, Answer<P>>>()
  /** Kept answers, oldest first, from `#head` on (the array is compacted as it empties). */
  #order: Answer<P>[] = []
  #head = 0
  #bytes = 0

  constructor(readonly maxBytes: number) {}

  /** Answers kept now. */
  get size(): number {
    return this.#order.length - this.#head
  }

  /** Remembers `reply` as the answer to `request` (the frame as read) from `peer` under `id`; a large reply is not kept. */
  remember(peer: P, id: number, request: Buffer, reply: Buffer): void {
    if (reply.length > ANSWER_KEPT_MAX_BYTES || this.maxBytes <= 0) return
    let answers = this.#byPeer.get(peer)
    if (answers === undefined) this.#byPeer.set(peer, (answers = new Map()))
    const answer: Answer<P> = { peer, id, length: request.length, checksum: crc32(request), reply }
    const replaced = answers.get(id)
    if (replaced !== undefined) this.#bytes -= replaced.reply.length + ANSWER_OVERHEAD_BYTES
    answers.set(id, answer)
    this.#order.push(answer)
    this.#bytes += reply.length + ANSWER_OVERHEAD_BYTES
    while (this.#bytes > this.maxBytes && this.size > 0) this.#forgetOldest()
  }

  /** The reply sent to this very request (same peer, id and bytes), if it is still kept. */
  replyTo(peer: P, id: number, request: Buffer): Buffer | undefined {
    const answer = this.#byPeer.get(peer)?.get(id)
    if (answer === undefined || answer.length !== request.length || answer.checksum !== crc32(request)) return undefined
    return answer.reply
  }

  clear(): void {
    this.#byPeer.clear()
    this.#order = []
    this.#head = 0
    this.#bytes = 0
  }

  #forgetOldest(): void {
    const oldest = this.#order[this.#head]!
    this.#order[this.#head++] = undefined as unknown as Answer<P>
    if (this.#head > 1024 && this.#head * 2 > this.#order.length) {
      this.#order = this.#order.slice(this.#head)
      this.#head = 0
    }
    const answers = this.#byPeer.get(oldest.peer)
    // An answer replaced under the same id was counted out when it was replaced.
    if (answers?.get(oldest.id) !== oldest) return
    this.#bytes -= oldest.reply.length + ANSWER_OVERHEAD_BYTES
    answers.delete(oldest.id)
    if (answers.size === 0) this.#byPeer.delete(oldest.peer)
  }
}
