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
  /**
   * Opens a hand-driven connection to a server, as an unauthenticated peer would: `handshake`
   * (default true) does what the transport needs before frames (ZeroMQ: the ZMTP greeting and READY
   * as a Dealer for `request`, a Subscriber for `publish`; TCP: nothing); without it the connection
   * stays silent. `localAddress` picks the address it comes from (127.0.0.2 and so on, on loopback).
   * On a broker the "connection" is a message in progress to the server: `handshake: false` declares
   * one and sends none of it, frames are chunks, and a subscription is a hello naming the id.
   */
  connectRaw: (target: RawTarget, options?: { role?: 'request' | 'publish'; handshake?: boolean }) => RawConnection
  /**
   * Only for a broker transport (NATS), where servers bind no port: masters and minions are all
   * clients of the broker, and a server never holds a peer's connection. The few cases about sockets
   * the server owns run their broker equivalents through these instead (each case says which).
   */
  broker?: BrokerCompliance
}

/** What a broker transport gives the suite so the socket-bound cases test what they mean on a broker. */
export interface BrokerCompliance {
  /** Stops the broker (as a crash): "the server goes away" for the clients. */
  stopBroker(): Promise<void>
  /** Starts it again on the same address. */
  startBroker(): Promise<void>
  /** A transport whose broker is down, and its URL: what "the address is in use" becomes (the server cannot start). */
  unreachable(): { transport: Transport; url: string }
  /**
   * The connection caps, which on a broker are the broker's (nats-server's `max_connections`): the
   * transport's own test that a connection past the cap is refused with an error naming the URL and
   * that the servers, one connection each whatever the fleet's size, keep serving.
   */
  connectionCaps(): Promise<void>
}

export interface RawTarget {
  host: string
  port: number
  localAddress?: string
}

/** A connection a test drives byte by byte. Writes after the server closed it are ignored. */
export interface RawConnection {
  /** Connected (and past the handshake, when one was asked for); rejects if the connection failed first. */
  readonly ready: Promise<void>
  /** Resolves once the socket has closed, by either side. */
  readonly closed: Promise<void>
  readonly isClosed: boolean
  /** `host:port` of this end: the server's name for the peer. */
  localPeer(): string
  /** One whole frame in the transport's framing (ZeroMQ: a one-part message). */
  sendFrame(body: Uint8Array): void
  /** The header of a frame of `size` bytes, then `bytes` bytes of its body, leaving it incomplete. */
  startFrame(size: number, bytes: number): void
  /** More bytes on the wire (the rest of a frame begun with startFrame, one at a time to trickle). */
  sendBytes(bytes: Uint8Array): void
  /** Subscribes to `topic` on a publish server (ZeroMQ: a subscription message; TCP: a hello naming it as the id). */
  subscribe(topic: string): void
  /** Resolves once everything written so far has been handed to the kernel (or the socket closed). */
  drained(): Promise<void>
  close(): void
}

/** Every case the suite registers, so a run can report exactly what ran. */
export type ComplianceCase =
  | 'request-reply: a request gets its reply'
  | 'request-reply: 200 concurrent requests answered out of order each reach their caller'
  | 'request-reply: the handler sees the request context'
  | 'timeouts: TimeoutError after exactly `tries` attempts, carrying address, timeout and tries'
  | 'timeouts: a late reply to an earlier try completes the request'
  | 'timeouts: a patient client keeps waiting while the server holds its request (Pending notices), beyond its tries'
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
  | 'request limits: a request over the depth or entry bound is answered with a FrameLimitError naming the bound, and the server keeps serving'
  | 'request limits: beyond `hwm` requests in flight the client refuses with InFlightLimitError naming `limit`'
  | 'request limits: beyond `concurrency` handler calls requests wait in a bounded backlog, and beyond that get a ServerBusyError reply'
  | 'request limits: a request `urgent` picks is served before every request already waiting in a full backlog'
  | 'request limits: a retry of a request still waiting for a handler slot is not queued again, and the one reply answers it'
  | 'request limits: a reply over max_frame_bytes becomes an error reply naming the limit'
  | 'request limits: past `maxInFlightBytes` a server takes no more requests in: a socket transport stops reading its peers until half is answered, a broker one refuses with ServerBusyError'
  | 'request limits: an over-limit reply is dropped by the client, which times the request out and keeps the link'
  | 'request limits: a request served or waiting holds its own bytes, not the chunk it was read with (what `maxInFlightBytes` counts is what it holds)'
  | 'malformed input: 10,000 garbage frames leave the server answering'
  | 'malformed input: each kind of bad envelope is dropped with one frame-drop giving a reason'
  | 'close: close is idempotent and resolves `closed`'
  | 'close: pending and later sends reject with ClosedError'
  | 'close: a publish client iterator ends on close'
  | 'close: a closed server port can be bound again at once'
  | 'close: binding a port in use raises AddressInUseError naming it'
  | 'close: endpoints never started close, and cannot start after'
  | 'lifecycle: handle() once and before start(), start() once, send() only after start()'
  | 'hardening: a frame declaring twenty million empty maps is refused before decoding, and the server keeps serving'
  | 'hardening: a frame nested deeper than max_frame_depth is refused before decoding'
  | 'hardening: 200,000 subscriptions from one peer leave the subscription table bounded'
  | 'hardening: a frame over max_frame_bytes is skipped as it streams: 64 MiB pass a budget of 1 MiB'
  | 'hardening: incomplete frames over all peers stay within max_pending_bytes; the slowest-arriving is given up'
  | 'hardening: a silent peer and a trickling peer are dropped after the idle timeout; a client idle between requests is kept'
  | 'hardening: connections per address and in total are capped, refused as they arrive and logged at a bounded rate'
  | 'hardening: a request of more entries than max_frame_entries sent by a client is refused with a frame-drop and a FrameLimitError answer, the link kept'
  | 'doors: a peer that never completes its greeting is dropped at handshake_timeout, whatever it trickles; a greeted client is kept'
  | 'doors: a frame begun after the greeting is dropped at frame_timeout, however steadily it trickles; a client idle between frames is kept'
  | 'doors: at a connection cap the oldest peers that never greeted are evicted for a newcomer; greeted peers stay'
  | 'doors: with none ungreeted, the longest idle peer that greeted but never authenticated is evicted; an authenticated one never is'
  | 'doors: a request server on a unix socket path answers over it, owner-only, while the network caps are full'
