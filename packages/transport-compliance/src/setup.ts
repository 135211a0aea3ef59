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
  | 'timeouts: tries and timeout are checked alike, a RangeError naming the bad value, before anything is sent'
  | 'handler failure: a throwing handler yields an error reply and the server keeps serving'
  | 'publish: a broadcast reaches every one of K subscribers'
  | 'publish: loads arrive whole and in order'
  | 'targeting: a targeted publish reaches only the named subscribers'
  | 'targeting: subscribe(id) after start() brings the targeted publishes for that id'
  | 'reconnect: clients reconnect after the server restarts on the same port'
  | 'limits: a 16 MiB payload makes the round trip by request and by publish'
  | 'limits: an over-limit frame raises FrameTooLargeError on send'
  | 'limits: an over-limit frame is dropped on receive and the connection keeps serving'
  | 'limits: a stalled subscriber is bounded by the high-water mark and drops are counted'
  | 'limits: an over-limit publish is dropped by the subscriber, which keeps receiving'
  | 'limits: a subscriber that stops reading keeps `hwm` loads and drops the newest, counted'
  | 'request limits: beyond `hwm` requests in flight the client refuses with InFlightLimitError naming `limit`'
  | 'request limits: beyond `concurrency` handler calls requests wait in a bounded backlog, and beyond that get a ServerBusyError reply'
  | 'request limits: a reply over max_frame_bytes becomes an error reply naming the limit'
  | 'request limits: an over-limit reply is dropped by the client, which times the request out and keeps the link'
  | 'malformed input: 10,000 garbage frames leave the server answering'
  | 'malformed input: each kind of bad envelope is dropped with one frame-drop giving a reason'
  | 'close: close is idempotent and resolves `closed`'
  | 'close: pending and later sends reject with ClosedError'
  | 'close: a publish client iterator ends on close'
  | 'close: a closed server port can be bound again at once'
  | 'close: binding a port in use raises AddressInUseError naming it'
  | 'close: endpoints never started close, and cannot start after'
  | 'lifecycle: handle() once and before start(), start() once, send() only after start()'
