import type { BackoffOptions, WireValue, Logger } from '@brine/core'

/** Events every endpoint reports through {@link Endpoint.events}; a union discriminated on `type`. */
export type TransportEvent =
  | { type: 'listening'; address: string }
  | { type: 'peer-connect'; peer: string }
  | { type: 'peer-disconnect'; peer: string; reason?: string }
  /** A subscriber announced itself: `topic` is its id (TCP hello; ZeroMQ shows the hashed topic) or `broadcast`. */
  | { type: 'peer-subscribe'; peer: string; topic: string }
  | { type: 'reconnect-attempt'; address: string; attempt: number; delay: number }
  /** An incoming frame was refused: too large, undecodable, or the wrong shape. */
  | { type: 'frame-drop'; peer: string; reason: string; size: number }
  /** An outgoing or received message was dropped because a bounded queue was full. */
  | { type: 'message-drop'; peer: string; reason: string }
  /** A request handler threw; the requester got an error reply. */
  | { type: 'handler-error'; peer: string; error: string }
  /**
   * A server refused a connection as it arrived: `max_connections` or `max_connections_per_address`
   * reached. The socket was closed at once; nothing was read from it.
   */
  | { type: 'peer-refuse'; peer: string; reason: string }
  /**
   * A server closed a connection for what the peer did: no whole frame within `peer_idle_timeout`
   * (silent, stalled or trickling), no greeting within `handshake_timeout` or no whole frame within
   * `frame_timeout` of its first byte (whatever it trickles), evicted ungreeted to make room for a
   * new connection at a connection cap, its incomplete frame given up to keep `max_pending_bytes`,
   * or subscriptions it may not make. A `peer-disconnect` follows.
   */
  | { type: 'peer-drop'; peer: string; reason: string }
  /**
   * A request server holds more bytes of requests read and not yet answered than `maxInFlightBytes`: it stops
   * taking requests in (a socket transport stops reading its peers, whose requests wait in their sockets; a broker
   * transport keeps what still fits as frames and refuses the rest with ServerBusyError) until what it holds falls to
   * half the bound (`intake-resume`).
   */
  | { type: 'intake-pause'; bytes: number; limit: number }
  | { type: 'intake-resume'; bytes: number; limit: number }

export type TransportEventType = TransportEvent['type']

/** Counters a test or a daemon can read instead of timing anything. */
export interface EndpointStats {
  /** Messages waiting in send or receive queues right now (a server's requests waiting for a handler slot included). */
  queued: number
  /** Messages dropped at a high-water mark, in total. */
  dropped: number
  /** Incoming frames refused (too large or malformed), in total. */
  framesDropped: number
  /** Successful reconnections after a lost connection, in total. */
  reconnects: number
  /**
   * Requests refused at a limit, in total: by a client with `hwm` requests in flight
   * (InFlightLimitError), by a server with `concurrency` handler calls running and `backlog` waiting
   * (an error reply of ServerBusyError).
   */
  refused: number
  /** Requests sent and not yet answered (clients) or in their handler (servers). */
  inFlight: number
  /** Peers connected right now (servers), or 1/0 for a client's link. */
  peers: number
  /**
   * Publish servers: topics held now over every subscriber (a TCP subscriber holds `broadcast` and its
   * id; a ZeroMQ one at most MAX_SUBSCRIPTIONS_PER_PEER); 0 elsewhere.
   */
  subscriptions: number
  /** Servers: connections refused as they arrived (`peer-refuse`), in total. */
  peersRefused: number
  /** Servers: connections closed for what the peer did (`peer-drop`), in total. */
  peersDropped: number
  /**
   * Times this endpoint fell behind what a broker delivered to it, in total: the broker reported it a
   * slow consumer, or its receive queue reached `hwm` (NATS; 0 on the socket transports, where a full
   * queue is counted in `dropped` alone).
   */
  slowConsumers: number
  /**
   * Servers: tries of a request that arrived while an earlier try of it (same peer, same request id) was still
   * waiting for a handler slot or in its handler, or just after it was answered, in total. Such a try is not served
   * again: the earlier try's reply answers it (sent again, when it had gone already), and a try of a request still
   * in hand is told so with a Pending notice.
   */
  coalesced: number
}

/** The lifecycle every role shares. */
export interface Endpoint extends AsyncDisposable {
  /** `tcp://host:port` this endpoint binds or connects to. */
  readonly address: string
  /**
   * Servers: resolves once bound (rejects with AddressInUseError naming host:port).
   * Clients: resolves at once; connecting (and reconnecting) goes on in the background.
   */
  start(): Promise<void>
  /** Idempotent. Pending work rejects with ClosedError; iterators end with `{done: true}`. */
  close(): Promise<void>
  /** Resolves when the endpoint has closed; never rejects. */
  readonly closed: Promise<void>
  /**
   * The endpoint's events, buffered (bounded, oldest dropped) from creation. A single consumer:
   * calling it twice throws InvalidOperationError.
   */
  events(): AsyncIterable<TransportEvent>
  stats(): EndpointStats
}

/** Options every endpoint takes. Times in this API are milliseconds; config keys stay in seconds. */
export interface EndpointOptions {
  /** Host to bind or connect to. */
  host: string
  /** Port to bind or connect to; a server may pass 0 to take a free port (see `address`). */
  port: number
  /**
   * A unix socket to bind or connect to instead of host:port (the master's local channel under
   * `sock_dir`). A server replaces a stale socket file, makes it owner-only (0600), and counts its
   * connections apart from the process's network caps, so no remote peer can fill it.
   */
  path?: string
  /** Largest frame body accepted or sent, in bytes (default 64 MiB, DESIGN's max_frame_bytes). */
  maxFrameBytes?: number
  /** Messages queued per peer before new ones are dropped (default 1000, Salt's pub_hwm). */
  hwm?: number
  /**
   * Entries (array elements plus map pairs) one received message may hold, checked on its bytes
   * before it is decoded (servers: default 262,144, `max_frame_entries`; clients: 4,194,304).
   */
  maxFrameEntries?: number
  /** How deep one received message may nest arrays and maps (servers: default 64, `max_frame_depth`; clients: 256). */
  maxFrameDepth?: number
  /** Where a broker transport (NATS) connects and how it authenticates; the socket transports ignore it. */
  broker?: BrokerOptions
  /**
   * Clients of one process given the same scope object (by identity) may ride one connection to a broker:
   * a minion's publish and request clients to one master are one NATS connection, not two. The socket
   * transports, whose clients each own their socket, ignore it.
   */
  connectionScope?: object
  logger?: Logger
}

/**
 * A broker transport's connection (NATS: `nats_servers`, `nats_subject_prefix`, credentials, TLS).
 * `host`/`port` still name the service on the broker: the port is part of every subject, so two
 * masters on one broker are told apart by port or by prefix.
 */
export interface BrokerOptions {
  /** Server URLs to fail over among (`nats://host:4222`, `tls://…`). */
  servers?: readonly string[]
  /** First subject token(s), so several fleets share one broker (`nats_subject_prefix`). */
  subjectPrefix?: string
  user?: string
  password?: string
  token?: string
  /** A file holding an nkey seed (`SU…`). */
  nkeySeedFile?: string
  /** A `.creds` file (JWT and seed). */
  credsFile?: string
  /** PEM files: the CA to verify the server, the client's certificate and key. */
  tlsCa?: string
  tlsCert?: string
  tlsKey?: string
}

/**
 * What a server admits from peers it has not authenticated. Connections and incomplete frames are
 * counted over every server of the process (file descriptors and memory are the process's), each
 * server holding its peers to the limits it was given.
 */
export interface ServerOptions extends EndpointOptions {
  /**
   * Connections open at once over all servers of the process (`max_connections`); one more is
   * refused as it arrives (`peer-refuse`). Default: below the open-file limit (RLIMIT_NOFILE) by an
   * eighth of it, and by at least 64, kept for the daemon's own files and sockets.
   */
  maxConnections?: number
  /** Connections open at once from one address, over all servers (`max_connections_per_address`; default a quarter of maxConnections). */
  maxConnectionsPerAddress?: number
  /**
   * Bytes of incomplete frames held over all connections of all servers (`max_pending_bytes`;
   * default 256 MiB, at least maxFrameBytes). When a chunk takes the total over it, the connection
   * whose frame in progress is arriving slowest is dropped.
   */
  maxPendingBytes?: number
  /**
   * ms a connection may go without progress while it owes a frame (`peer_idle_timeout`; default
   * 30,000): a new connection must complete its first frame (ZeroMQ: its handshake), and an
   * incomplete frame must grow by 64 KiB or complete, within it; else the connection is dropped.
   * A connection between frames may stay idle for ever.
   */
  idleTimeout?: number
  /**
   * ms from connect within which a peer must complete its greeting — its first whole frame (ZeroMQ:
   * the ZMTP greeting and handshake) — whatever it trickles meanwhile (`handshake_timeout`; default
   * 30,000, libzmq's ZMQ_HANDSHAKE_IVL; 0 for none). Until then it is the first evicted at a
   * connection cap.
   */
  handshakeTimeout?: number
  /**
   * ms from a frame's first byte within which it must complete, whatever arrives meanwhile
   * (`frame_timeout`; default 300,000; 0 for none): a slowloris cannot keep a connection by
   * trickling just enough to look alive.
   */
  frameTimeout?: number
  /**
   * Connections the kernel completes and holds for the server until it accepts them (the `listen` backlog;
   * Salt's `zmq_backlog`, default 1000 here as there, capped by the kernel's `net.core.somaxconn`). A fleet
   * reconnecting at once after a master restart arrives faster than a master still starting accepts; past the
   * backlog the kernel drops the handshakes and each client retries its SYN a second or more later.
   */
  listenBacklog?: number
}

/** Salt's `zmq_backlog` default. */
export const DEFAULT_LISTEN_BACKLOG = 1000

/** What both client roles add to the lifecycle. */
export interface ClientEndpoint extends Endpoint {
  /**
   * While the connection to the server is down and a reconnect attempt is waiting for its turn: make one
   * attempt now, and keep to the schedule after it. A no-op when connected, closed, not started, or when the
   * transport's connection is a broker's (it does not follow the server). Its caller knows the server is back
   * (a minion's other link to the same master has just reconnected), so waiting out the rest of the backoff
   * would only keep this link away for no reason.
   */
  reconnectNow(): void
}

export interface ClientOptions extends EndpointOptions {
  /** Reconnect backoff (Salt's recon_default / recon_max / recon_randomize, in ms). */
  reconnect?: BackoffOptions
  /**
   * ms a client waits for the server's half of the greeting before it drops the connection and
   * reconnects (ZeroMQ: the ZMTP greeting and READY; default 30,000, libzmq's ZMQ_HANDSHAKE_IVL). TCP has no greeting from the
   * server: there a request's own timeout stands.
   */
  handshakeTimeout?: number
}

export type PublishServerOptions = ServerOptions

export interface RequestServerOptions extends ServerOptions {
  /**
   * Handler calls running at once (default 8192); a request beyond it waits for a slot. A cap of 1,024 made
   * the bench's 200-job burst to 1,000 minions back up behind it; 8,192 costs that burst nothing.
   */
  concurrency?: number
  /**
   * Requests waiting for a handler slot, at most (default 262144: the bench's 200-job burst puts up to
   * 200,000 returns at a TCP master at once, and with 65,536 some were refused). A request arriving when `concurrency`
   * calls run and `backlog` wait gets a ServerBusyError reply at once and is counted in
   * `stats().refused`, so a flood costs the server bounded memory. 0: refuse as soon as every slot is taken.
   */
  backlog?: number
  /**
   * Picks the requests that, when every handler slot is taken, wait in a lane of their own, served before
   * any other waiting request (in arrival order within each lane; `backlog` bounds both together). A master
   * picks its operator's requests (publish, runner, wheel), so they never wait behind minions' returns.
   * Called only for a request that has to wait, or that a server without an intake gate would refuse for
   * `maxInFlightBytes` (an urgent one is not refused for it); it must not throw.
   */
  urgent?: (request: WireValue) => boolean
  /**
   * Bytes of requests read and not yet answered (running and waiting), at most, each counted as its frame and
   * {@link REQUEST_OVERHEAD_BYTES} more (default {@link DEFAULT_MAX_IN_FLIGHT_BYTES}): past it the server takes no
   * more in (`intake-pause`), so a burst from every peer at once waits in the peers' sockets or their retries, not
   * in this process's memory. One request larger than the bound is still served when nothing else is in flight.
   * A server without a gate (a broker's) runs calls within half the bound and lets a request past that wait as its
   * frame, counted at its bytes and {@link WAITING_FRAME_OVERHEAD_BYTES}, while the whole fits; it refuses only past that.
   */
  maxInFlightBytes?: number
}

export interface PublishClientOptions extends ClientOptions {
  /** Subscriber id (the minion id), same as calling subscribe(id) before start(). */
  id?: string
}

export interface RequestClientOptions extends ClientOptions {
  /** Default per-try timeout for send(), ms (default 60000); a positive number up to 2^31 − 1, else RangeError. */
  timeout?: number
  /** Default attempts for send() (default 1); a positive integer, else RangeError. */
  tries?: number
  /** `hwm` is also the most requests in flight at once; one more is refused with InFlightLimitError. */
  hwm?: number
}

export interface PublishOptions {
  /** Subscriber ids to reach; absent means broadcast to every subscriber. */
  topics?: readonly string[]
}

/** Master side: binds `publish_port` and pushes loads to subscribers. */
export interface PublishServer extends Endpoint {
  /** Resolves once queued for every recipient (not when delivered). Throws FrameTooLargeError. */
  publish(payload: WireValue, options?: PublishOptions): Promise<void>
}

/** Minion side: connects to `publish_port`; yields every load addressed to it or broadcast. */
export interface PublishClient extends ClientEndpoint, AsyncIterable<WireValue> {
  /** Announce the subscriber id so targeted publishes naming it arrive. Call before or after start(). */
  subscribe(id: string): void
}

export interface RequestContext {
  /** The peer's address, `host:port` or a transport-specific identity. */
  readonly peer: string
  /** The transport's name, `zeromq` or `tcp`. */
  readonly transport: string
  /**
   * The handler calls it once it has verified who sent this request (a load sealed by an accepted key, the
   * root key, an eauth login): the connection it came on is then never evicted to make room at a
   * connection cap. Until then an idle connection that has greeted may be, after every one that has not.
   * Transports without per-peer connections leave it out.
   */
  readonly authenticated?: () => void
  /** The peer's network address without its port (`10.0.0.7`, `::1`), when the transport knows it: what per-address limits key on. */
  readonly address?: string
}

export type RequestHandler = (request: WireValue, context: RequestContext) => Promise<WireValue>

/** Master side: binds `ret_port`; every request gets exactly the reply its handler produced. */
export interface RequestServer extends Endpoint {
  /** Set the handler once, before start(). A throwing handler yields an error reply. */
  handle(handler: RequestHandler): void
}

export interface SendOptions {
  /** Per-try timeout in ms: a positive number up to 2^31 − 1 (setTimeout's limit), else RangeError. */
  timeout?: number
  /** Attempts before TimeoutError, a positive integer, else RangeError; a late reply to any earlier attempt still counts. */
  tries?: number
  /**
   * Tries the server may hand back (default 0, a non-negative integer, else RangeError): a try the server answers with
   * a Pending notice (the request is still in its hands, waiting or running; the try came again meanwhile) does not
   * count, at most `patience` times, so a caller whose request is queued behind a burst keeps waiting for its answer
   * rather than giving up after `tries` and asking again from scratch. At most `tries + patience` tries in all.
   */
  patience?: number
  signal?: AbortSignal
}

/** Minion, client and syndic side: many requests in flight over one connection. */
export interface RequestClient extends ClientEndpoint {
  /**
   * Resolves with the reply. Rejects with TimeoutError after `tries` silent tries, RemoteError when
   * the handler threw, InFlightLimitError at the hwm, FrameTooLargeError, ClosedError once closed,
   * the signal's reason when aborted, InvalidOperationError before start().
   */
  send(request: WireValue, options?: SendOptions): Promise<WireValue>
}

/** A transport: four synchronous factories, no I/O until start(). */
export interface Transport {
  /** The config string that selects it: `zeromq`, `tcp` or `nats`. */
  readonly name: string
  /**
   * Whether its servers own a socket per peer (absent: they do, as ZeroMQ's and TCP's). A broker transport
   * (NATS) says false: its servers are clients of the broker, so there is no socket of theirs to put on a
   * unix path. Such a transport refuses `EndpointOptions.path`, and the master opens no local request
   * channel for it (two servers there would be one queue group on the same subject, not two doors).
   */
  readonly peerSockets?: boolean
  createPublishServer(options: PublishServerOptions): PublishServer
  createPublishClient(options: PublishClientOptions): PublishClient
  createRequestServer(options: RequestServerOptions): RequestServer
  createRequestClient(options: RequestClientOptions): RequestClient
}

export const DEFAULT_HWM = 1000
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000
/**
 * Handler calls a request server runs at once. A master's call for a return waits mostly for the job cache's group
 * commit, so how many must run to keep a throughput grows with that commit's latency (Little's law): a low count
 * starves the master of returns while it waits on the disk. What they hold is bounded by
 * {@link DEFAULT_MAX_IN_FLIGHT_BYTES}, which counts a running call as it counts a waiting one (but for a frame that
 * waits past the bound of a server without an intake gate, counted at its bytes: see `maxInFlightBytes`).
 */
export const DEFAULT_REQUEST_CONCURRENCY = 8192
export const DEFAULT_REQUEST_BACKLOG = 262_144
/**
 * A request server's bound on bytes of requests in flight. At 1,000 minions returning at once it holds some 6,000
 * small returns, more than half a second of a master's work at the rate it stores a burst, so the master never
 * idles for want of requests while the rest wait outside it.
 */
export const DEFAULT_MAX_IN_FLIGHT_BYTES = 16 * 1024 * 1024
/**
 * What a request in flight is taken to cost beyond its frame's bytes: its decoded form, its record while it waits,
 * the handler's promises and what the handler decodes from it (a sealed return, opened).
 */
export const REQUEST_OVERHEAD_BYTES = 2048
/**
 * What a request waiting as its frame is taken to cost beyond the frame's bytes (the frame a copy of its own, never
 * a view into a larger read): its record in the backlog, its entry among the ids in hand, its peer's name.
 */
export const WAITING_FRAME_OVERHEAD_BYTES = 256
/**
 * Largest frame a publish server accepts from a subscriber (a TCP hello, a ZeroMQ subscription):
 * larger ones are skipped unread (TCP) or end the connection (ZeroMQ).
 */
export const MAX_SUBSCRIBER_FRAME_BYTES = 4096
/**
 * Topics one ZeroMQ subscriber may hold: `broadcast` and the SHA-1 of its id, with room for a few
 * ids more (`subscribe(id)` again). A TCP subscriber holds one id (each hello replaces it).
 */
export const MAX_SUBSCRIPTIONS_PER_PEER = 8
/** Incomplete frames held over every server of a process (`max_pending_bytes`). */
export const DEFAULT_MAX_PENDING_BYTES = 256 * 1024 * 1024
/** `peer_idle_timeout`, ms. */
export const DEFAULT_PEER_IDLE_TIMEOUT_MS = 30_000
/** `handshake_timeout`, ms: libzmq's default ZMQ_HANDSHAKE_IVL. */
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 30_000
/** `frame_timeout`, ms: the largest frame (64 MiB) must arrive at 220 KB/s on average. */
export const DEFAULT_FRAME_TIMEOUT_MS = 300_000
