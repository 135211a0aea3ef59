import type { Transport } from '@brine/transport'

/** What a transport package hands the suite; the suite never imports a transport itself. */
export interface ComplianceSetup {
  /** The transport's config name, used in test titles. */
  name: string
  create: () => Transport | Promise<Transport>
  /**
   * Sends each byte array to a request server as one frame in the transport's own framing (TCP: length
   * prefix; ZeroMQ: one message from a raw Dealer), bypassing the client's encoder. Resolves once sent.
   */
  injectRaw: (target: { host: string; port: number }, frames: Uint8Array[]) => Promise<void>
}

/** Every case the suite registers, so a run can report exactly what ran. */
export type ComplianceCase =
  | 'request-reply: a request gets its reply'
  | 'request-reply: 200 concurrent requests answered out of order each reach their caller'
  | 'request-reply: the handler sees the request context'
  | 'timeouts: TimeoutError after exactly `tries` attempts, carrying address, timeout and tries'
  | 'timeouts: a late reply to an earlier try completes the request'
  | 'timeouts: an aborted signal rejects the request'
  | 'handler failure: a throwing handler yields an error reply and the server keeps serving'
  | 'publish: a broadcast reaches every one of K subscribers'
  | 'publish: loads arrive whole and in order'
  | 'targeting: a targeted publish reaches only the named subscribers'
  | 'reconnect: clients reconnect after the server restarts on the same port'
  | 'limits: a 16 MiB payload makes the round trip by request and by publish'
  | 'limits: an over-limit frame raises FrameTooLargeError on send'
  | 'limits: an over-limit frame is dropped on receive and the connection keeps serving'
  | 'limits: a stalled subscriber is bounded by the high-water mark and drops are counted'
  | 'malformed input: 10,000 garbage frames leave the server answering'
  | 'close: close is idempotent and resolves `closed`'
  | 'close: pending and later sends reject with ClosedError'
  | 'close: a publish client iterator ends on close'
  | 'close: a closed server port can be bound again at once'
  | 'close: binding a port in use raises AddressInUseError naming it'
