import { hostname, userInfo } from 'node:os'
import type { LogLevel } from '@brine/core'
import { secondsFromMs } from './units.js'

/** The daemons that read a config file; each reads `<configDir>/<role>`. */
export type Role = 'master' | 'minion' | 'syndic'
export const ROLES: readonly Role[] = ['master', 'minion', 'syndic']

/** The transports a config may name, exactly as Salt spells them. */
export const BUILTIN_TRANSPORTS = ['tcp', 'zeromq', 'nats'] as const
export type TransportName = (typeof BUILTIN_TRANSPORTS)[number]

/**
 * Value kinds the schema checks. `port` is an integer 0..65535 (0 binds a free port);
 * `string-or-list` is Salt's `master: host` or `master: [a, b]`; `master-finger` is one fingerprint
 * for every master, a list (one per entry of `master`, by position) or a mapping (by master).
 */
export type ValueKind =
  | 'string'
  | 'path'
  | 'nullable-string'
  | 'integer'
  | 'number'
  | 'port'
  | 'boolean'
  | 'map'
  | 'string-or-list'
  | 'list'
  | 'boolean-or-map'
  | 'map-list'
  | 'master-finger'
  | 'transport'
  | 'nullable-transport'
  | 'transport-opts'
  | 'log-level'
  | 'output-indent'
  | 'nullable-log-level'

export interface KindTypes {
  string: string
  path: string
  'nullable-string': string | null
  integer: number
  number: number
  port: number
  boolean: boolean
  map: Record<string, unknown>
  'string-or-list': string | string[]
  list: string[]
  'boolean-or-map': boolean | Record<string, unknown>
  'map-list': Record<string, unknown>[]
  'master-finger': MasterFinger
  transport: TransportName
  'nullable-transport': TransportName | null
  'transport-opts': Record<string, Record<string, unknown>>
  'log-level': LogLevel
  'output-indent': number | string | null
  'nullable-log-level': LogLevel | null
}

/** `master_finger`: one fingerprint for every master, one per master by position, or one per master by name. */
export type MasterFinger = string | string[] | Record<string, string>

/** What a default can depend on. */
export interface DefaultContext {
  role: Role
  configDir: string
}

export interface KeySpec {
  readonly kind: ValueKind
  readonly roles: readonly Role[]
  readonly default: unknown | ((context: DefaultContext) => unknown)
  /** A filesystem path that `root_dir` is prepended to (Salt's prepend_root_dir list). */
  readonly path?: boolean
  /** Allowed values for a string key. */
  readonly values?: readonly string[]
  /** Unit, for docs and error messages: seconds, hours, milliseconds, bytes. */
  readonly unit?: string
  /** Smallest and largest value of a numeric key (integer, number, port), inclusive. */
  readonly min?: number
  readonly max?: number
  /** Roles for which the key has no default: absent unless a file or flag sets it (typed optional for them). */
  readonly absentFor?: readonly Role[]
}

/**
 * The longest wait a Node timer can hold, in seconds (2^31 − 1 ms, about 24.8 days): a longer
 * `setTimeout` fires at once, so a time key beyond it would turn a wait into a busy loop.
 */
export const MAX_TIMER_SECONDS = Math.floor(secondsFromMs(2 ** 31 - 1))
/** The same bound for keys Salt keeps in milliseconds (recon_default, recon_max). */
export const MAX_TIMER_MS = 2 ** 31 - 1
/** Bounds of max_frame_bytes: a frame must hold an `_auth` or a publish, and stay one allocation. */
export const MIN_FRAME_BYTES = 65_536
export const MAX_FRAME_BYTES_LIMIT = 1_073_741_824
/** Most request worker threads: each is a V8 isolate, 8 MiB bare (measured) and more with the crypto code (100,000 of them took 6.8 GB and ignored SIGTERM). */
export const MAX_WORKER_THREADS = 128
/**
 * Most sealed requests the master's ReplayGuard remembers, per minion and in all: an entry costs about
 * 65 bytes (measured with 200,000), so the total bound caps that memory near 650 MB.
 */
export const MAX_REQUEST_NONCES_PER_MINION = 1_000_000
export const MAX_REQUEST_NONCES_TOTAL = 10_000_000

const ALL = ['master', 'minion', 'syndic'] as const
const MASTER = ['master', 'syndic'] as const
const MINION = ['minion', 'syndic'] as const
const MINION_ONLY = ['minion'] as const

function currentUser(): string {
  try {
    return userInfo().username
  } catch {
    return 'root'
  }
}

/**
 * The syndic reads the master's config file and works beside that master: it finds the master's root key
 * under the master's `cachedir` and its event bus under the master's `sock_dir`, so those default to the
 * master's. Its own keys default to a directory of their own (`/etc/brine/pki/syndic`).
 */
const sharedWithMaster = (role: Role): Role => (role === 'syndic' ? 'master' : role)

/** Salt's minion id default (get_id): the host's name. Salt asks for the FQDN; Node has only os.hostname(). */
function defaultId({ role }: DefaultContext): string {
  return role === 'master' ? `${hostname()}_master` : hostname()
}

/**
 * Every config key Brine knows, with Salt's name, type and default. Times are in Salt's units
 * (seconds unless `unit` says otherwise); `units.ts` converts them to the API's milliseconds.
 * `roles` lists the daemons that read the key; the syndic reads the master's keys plus the
 * minion-side keys it needs to connect upward, as a Salt syndic does.
 */
export const CONFIG_SCHEMA = {
  // Transport and addresses.
  interface: { kind: 'string', roles: MASTER, default: '0.0.0.0' },
  // A minion learns its master's publish port from the auth reply (as Salt's does); set, it overrides that.
  publish_port: { kind: 'port', roles: ALL, default: 4505, absentFor: MINION_ONLY },
  ret_port: { kind: 'port', roles: MASTER, default: 4506 },
  transport: { kind: 'transport', roles: ALL, default: 'zeromq' },
  transport_opts: { kind: 'transport-opts', roles: ALL, default: () => ({}) },
  zmq_filtering: { kind: 'boolean', roles: ALL, default: false },
  // 0 means "no limit" to libzmq: refused, a high-water mark exists to bound memory.
  pub_hwm: { kind: 'integer', roles: ALL, default: 1000, min: 1, max: 1_000_000 },
  max_frame_bytes: { kind: 'integer', roles: ALL, default: 67108864, unit: 'bytes', min: MIN_FRAME_BYTES, max: MAX_FRAME_BYTES_LIMIT },
  // Bounds before work on the master's ports (what an unauthenticated peer may cost): entries and depth of one
  // message, checked on its bytes before decoding; incomplete frames over all peers; a peer owing a frame that
  // makes no progress; connections in total and per address (0: derived from the open-file limit).
  max_frame_entries: { kind: 'integer', roles: MASTER, default: 262144, min: 1, max: 1_000_000_000 },
  max_frame_depth: { kind: 'integer', roles: MASTER, default: 64, min: 1, max: 10_000 },
  max_pending_bytes: { kind: 'integer', roles: MASTER, default: 268435456, unit: 'bytes', min: MIN_FRAME_BYTES, max: Number.MAX_SAFE_INTEGER },
  peer_idle_timeout: { kind: 'number', roles: MASTER, default: 30, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  // Deadlines a trickle cannot stretch: the greeting (first frame; ZMTP handshake) from connect, a frame from its first byte.
  handshake_timeout: { kind: 'number', roles: MASTER, default: 30, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  frame_timeout: { kind: 'number', roles: MASTER, default: 300, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  max_connections: { kind: 'integer', roles: MASTER, default: 0, min: 0, max: 10_000_000 },
  max_connections_per_address: { kind: 'integer', roles: MASTER, default: 0, min: 0, max: 10_000_000 },
  // The listen backlog of every socket server (Salt's key; the kernel caps it at net.core.somaxconn): a fleet
  // reconnecting after a master restart must fit in it, or the kernel drops handshakes that then wait seconds.
  zmq_backlog: { kind: 'integer', roles: MASTER, default: 1000, min: 1, max: 1_000_000 },
  ipv6: { kind: 'boolean', roles: ALL, default: false },
  // NATS (`transport: nats`): the servers every daemon connects to (it fails over among them), the subject prefix
  // that keeps fleets sharing a cluster apart, credentials (user/password, token, an nkey seed or a .creds file)
  // and TLS. publish_port and ret_port stay: on NATS they name the service in every subject.
  nats_servers: { kind: 'list', roles: ALL, default: () => ['nats://127.0.0.1:4222'] },
  nats_subject_prefix: { kind: 'string', roles: ALL, default: 'brine' },
  nats_user: { kind: 'nullable-string', roles: ALL, default: null },
  nats_password: { kind: 'nullable-string', roles: ALL, default: null },
  nats_token: { kind: 'nullable-string', roles: ALL, default: null },
  nats_nkey_seed_file: { kind: 'nullable-string', roles: ALL, default: null },
  nats_creds_file: { kind: 'nullable-string', roles: ALL, default: null },
  nats_tls_ca: { kind: 'nullable-string', roles: ALL, default: null },
  nats_tls_cert: { kind: 'nullable-string', roles: ALL, default: null },
  nats_tls_key: { kind: 'nullable-string', roles: ALL, default: null },

  // Master workers and jobs.
  // 0 handles requests on the main thread (tests, small masters).
  worker_threads: { kind: 'integer', roles: MASTER, default: 5, min: 0, max: MAX_WORKER_THREADS },
  timeout: { kind: 'number', roles: MASTER, default: 5, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  // Each find_job round waits this long: 0 would publish find_job in a tight loop while a job runs.
  gather_job_timeout: { kind: 'number', roles: MASTER, default: 10, unit: 'seconds', min: 0.1, max: MAX_TIMER_SECONDS },
  keep_jobs: { kind: 'number', roles: MASTER, default: 24, unit: 'hours', min: 0, max: 876_000 },
  // `brine` switches to batch mode when a target matches at least batch_safe_limit minions (0 or 1: never),
  // with batches of batch_safe_size: a count or a percentage ('10%'), so a string as Salt's CLI reads it.
  batch_safe_limit: { kind: 'integer', roles: MASTER, default: 0, min: 0, max: 1_000_000_000 },
  batch_safe_size: { kind: 'string', roles: MASTER, default: '8' },
  master_job_cache: { kind: 'string', roles: MASTER, default: 'local_cache' },
  job_cache: { kind: 'boolean', roles: MASTER, default: true },
  nodegroups: { kind: 'map', roles: ALL, default: () => ({}) },
  file_roots: { kind: 'map', roles: ALL, default: () => ({ base: ['/srv/brine'] }) },
  // The file server (docs/file-server.md). Chunks of file_buffer_size bytes cross the sealed channel; pushed files
  // (cp.push) are taken only with file_recv, each at most file_recv_max_size MiB (Salt's units, converted in units.ts).
  file_buffer_size: { kind: 'integer', roles: ALL, default: 262144, unit: 'bytes', min: 4096, max: 16_777_216 },
  file_ignore_regex: { kind: 'list', roles: MASTER, default: () => [] },
  file_ignore_glob: { kind: 'list', roles: MASTER, default: () => [] },
  file_recv: { kind: 'boolean', roles: MASTER, default: false },
  file_recv_max_size: { kind: 'number', roles: MASTER, default: 100, unit: 'MiB', min: 0, max: 1_048_576 },
  hash_type: { kind: 'string', roles: ALL, default: 'sha256', values: ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512'] },
  saltenv: { kind: 'nullable-string', roles: MINION, default: null },

  // External auth and the REST API (Salt's external_auth, token and netapi keys).
  external_auth: { kind: 'map', roles: MASTER, default: () => ({}) },
  /** Seconds an eauth token lives (Salt: 12 hours). */
  token_expire: { kind: 'number', roles: MASTER, default: 43200, unit: 'seconds', min: 1, max: 315_360_000 },
  /** May a user ask for its own token_expire: true, or `{backend: [users]}`. */
  token_expire_user_override: { kind: 'boolean-or-map', roles: MASTER, default: false },
  /** Where the master keeps eauth tokens (Salt's localfs token store). */
  token_dir: { kind: 'string', roles: MASTER, path: true, default: ({ role }: DefaultContext) => `/var/cache/brine/${role}/tokens` },
  /** Where `brine -T` saves the token it made (Salt's ~/.salt_token). */
  token_file: { kind: 'string', roles: MASTER, default: '~/.brine_token' },
  // Brine's (Salt has none): failed logins (eauth credentials, mk_token, the REST API's /login) one user name and one
  // client address may have per window before further ones are refused (429 at the API); 0 for no limit. Password
  // hashes are checked on eauth_hash_threads worker threads (0: the main thread), at most eauth_hash_backlog waiting.
  eauth_rate_limit_user: { kind: 'integer', roles: MASTER, default: 10, min: 0, max: 1_000_000 },
  eauth_rate_limit_address: { kind: 'integer', roles: MASTER, default: 30, min: 0, max: 1_000_000 },
  eauth_rate_limit_window: { kind: 'number', roles: MASTER, default: 60, unit: 'seconds', min: 0.001, max: MAX_TIMER_SECONDS },
  eauth_hash_threads: { kind: 'integer', roles: MASTER, default: 1, min: 0, max: MAX_WORKER_THREADS },
  eauth_hash_backlog: { kind: 'integer', roles: MASTER, default: 64, min: 0, max: 1_000_000 },
  /** Salt's permissive_acl: `*`'s entries apply to every user, not only to users no entry names. */
  permissive_acl: { kind: 'boolean', roles: MASTER, default: false },
  /** The clients the REST API may use (Salt 3006: none until listed). */
  netapi_enable_clients: { kind: 'list', roles: MASTER, default: () => [] },
  /** The REST API's settings (Salt's rest_cherrypy block; `port` is required to start brine-api). */
  rest_cherrypy: { kind: 'map', roles: MASTER, default: () => ({ host: '0.0.0.0' }) },

  // Automation (docs/automation.md, docs/audit.md): the reactor's tag globs to reaction files, the user its calls
  // run as, how deep a chain of reactions may go; schedules (minion: functions; master: runners); the audit log.
  reactor: { kind: 'map-list', roles: MASTER, default: () => [] },
  reactor_user: { kind: 'string', roles: MASTER, default: 'root' },
  reactor_loop_limit: { kind: 'integer', roles: MASTER, default: 5, min: 1, max: 1000 },
  // Salt's reactor_worker_threads / reactor_worker_hwm: reactions run at once, and waiting (beyond it: refused, logged).
  reactor_worker_threads: { kind: 'integer', roles: MASTER, default: 10, min: 1, max: 1000 },
  reactor_worker_hwm: { kind: 'integer', roles: MASTER, default: 10000, min: 1, max: 10_000_000 },
  schedule: { kind: 'map', roles: ALL, default: () => ({}) },
  // Events a minion sends (event.send, event.fire_master): bytes per event, and a rate per minion (events/s, burst).
  minion_event_max_bytes: { kind: 'integer', roles: MASTER, default: 65536, unit: 'bytes', min: 1024, max: 67108864 },
  minion_event_rate: { kind: 'number', roles: MASTER, default: 10, min: 0.01, max: 1_000_000 },
  minion_event_burst: { kind: 'integer', roles: MASTER, default: 50, min: 1, max: 1_000_000 },
  // '': the daemons use `audit` beside log_file (loadConfig sets it); a Master embedded as a library, <cachedir>/audit.
  audit_log: { kind: 'string', roles: MASTER, default: '' },

  // Keys and security.
  auto_accept: { kind: 'boolean', roles: MASTER, default: false },
  open_mode: { kind: 'boolean', roles: MASTER, default: false },
  // Keys minions_pre may hold; a new id's _auth beyond it is refused (docs/security.md).
  max_pending_keys: { kind: 'integer', roles: MASTER, default: 5000, min: 1, max: 10_000_000 },
  publish_session: { kind: 'number', roles: MASTER, default: 86400, unit: 'seconds', min: 1, max: MAX_TIMER_SECONDS },
  // Replay protection (docs/protocol.md, "Freshness"): a published job is valid publish_ttl seconds; a sealed
  // minion request within +/- request_window of the master's clock, each applied once, the memory of them bounded.
  publish_ttl: { kind: 'number', roles: MASTER, default: 60, unit: 'seconds', min: 1, max: MAX_TIMER_SECONDS },
  request_window: { kind: 'number', roles: MASTER, default: 300, unit: 'seconds', min: 1, max: MAX_TIMER_SECONDS },
  request_nonces_per_minion: { kind: 'integer', roles: MASTER, default: 20000, min: 1, max: MAX_REQUEST_NONCES_PER_MINION },
  request_nonces_total: { kind: 'integer', roles: MASTER, default: 200000, min: 1, max: MAX_REQUEST_NONCES_TOTAL },
  // How far ahead another clock may be: jids dated beyond it are refused by the master, and publishes issued
  // beyond it make a minion check the master's time again.
  clock_skew: { kind: 'number', roles: ALL, default: 300, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  sign_pub_messages: { kind: 'boolean', roles: ALL, default: true },
  master_finger: { kind: 'master-finger', roles: MINION, default: '' },

  // Identity and the minion's masters.
  id: { kind: 'string', roles: ALL, default: defaultId },
  master: { kind: 'string-or-list', roles: MINION_ONLY, default: 'salt' },
  master_port: { kind: 'port', roles: MINION_ONLY, default: 4506, min: 1 },
  master_type: { kind: 'string', roles: MINION_ONLY, default: 'str', values: ['str', 'failover', 'func', 'disable'] },
  // master_type failover: how often the master in use is checked (0: never, as Salt), whether and how often
  // (0: every master_alive_interval) the first master is tried again, and whether the order is shuffled.
  master_alive_interval: { kind: 'number', roles: MINION_ONLY, default: 0, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  master_failback: { kind: 'boolean', roles: MINION_ONLY, default: false },
  master_failback_interval: { kind: 'number', roles: MINION_ONLY, default: 0, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  random_master: { kind: 'boolean', roles: MINION_ONLY, default: false },
  grains: { kind: 'map', roles: MINION, default: () => ({}) },
  // Custom execution modules: synced ones live under extension_modules (absent: <cachedir>/extmods, as Salt
  // derives it), and module_dirs adds local directories searched before it (the first holding a name wins).
  extension_modules: { kind: 'path', roles: MINION_ONLY, path: true, default: undefined, absentFor: MINION_ONLY },
  module_dirs: { kind: 'list', roles: MINION_ONLY, default: () => [] },
  multiprocessing: { kind: 'boolean', roles: MINION_ONLY, default: true },

  // Minion retries and reconnects.
  // Per-try timeout of a return and the wait before a spool retry: 0 would retry in a tight loop.
  return_retry_timer: { kind: 'number', roles: MINION, default: 5, unit: 'seconds', min: 0.1, max: MAX_TIMER_SECONDS },
  return_retry_timer_max: { kind: 'number', roles: MINION, default: 10, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  return_retry_tries: { kind: 'integer', roles: MINION, default: 3, min: 1, max: 1000 },
  recon_default: { kind: 'integer', roles: MINION, default: 1000, unit: 'milliseconds', min: 10, max: MAX_TIMER_MS },
  recon_max: { kind: 'integer', roles: MINION, default: 10000, unit: 'milliseconds', min: 10, max: MAX_TIMER_MS },
  recon_randomize: { kind: 'boolean', roles: MINION, default: true },
  acceptance_wait_time: { kind: 'number', roles: MINION, default: 10, unit: 'seconds', min: 0.1, max: MAX_TIMER_SECONDS },
  // 0: the wait does not grow (Salt's default).
  acceptance_wait_time_max: { kind: 'number', roles: MINION, default: 0, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  auth_tries: { kind: 'integer', roles: MINION, default: 7, min: 1, max: 1000 },
  // A random wait up to this before re-authenticating for a changed master key, and the cap of the backoff after _auth timeouts.
  random_reauth_delay: { kind: 'number', roles: MINION, default: 10, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  auth_timeout: { kind: 'number', roles: MINION, default: 5, unit: 'seconds', min: 0.1, max: MAX_TIMER_SECONDS },

  // Syndic and multi-master. The syndic's keys live in the master's config file (as in Salt), so the
  // master reads them without a warning; `order_masters` and `syndic_wait` are the upper master's.
  syndic_master: { kind: 'string-or-list', roles: MASTER, default: 'masterofmasters' },
  syndic_master_port: { kind: 'port', roles: MASTER, default: 4506, min: 1 },
  // A syndic learns its upper master's publish port from the auth reply (as a minion does); set, it overrides that.
  syndic_master_publish_port: { kind: 'port', roles: MASTER, default: undefined, min: 1, absentFor: MASTER },
  // The transport of the syndic's link to its upper master (null: the master's own `transport`).
  syndic_transport: { kind: 'nullable-transport', roles: MASTER, default: null },
  syndic_finger: { kind: 'string', roles: MASTER, default: '' },
  syndic_failover: { kind: 'string', roles: MASTER, default: 'random', values: ['random', 'ordered'] },
  syndic_wait: { kind: 'number', roles: MASTER, default: 5, unit: 'seconds', min: 0, max: MAX_TIMER_SECONDS },
  // Distinct minions one syndic may announce in one batch, and in all (the upper master's bound; docs/security.md).
  syndic_max_minions: { kind: 'integer', roles: MASTER, default: 10000, min: 1, max: 10_000_000 },
  syndic_event_forward_timeout: { kind: 'number', roles: MASTER, default: 0.5, unit: 'seconds', min: 0.01, max: MAX_TIMER_SECONDS },
  // Jids whose load (Salt's __load__) the syndic remembers having sent up, so each load goes up once.
  syndic_jid_forward_cache_hwm: { kind: 'integer', roles: MASTER, default: 100, min: 1, max: 1_000_000 },
  // Returns the syndic could not forward wait on disk, up to this many bytes (then new ones are refused, logged).
  syndic_spool_max_bytes: { kind: 'integer', roles: MASTER, default: 268435456, unit: 'bytes', min: 0, max: Number.MAX_SAFE_INTEGER },
  syndic_log_file: { kind: 'path', roles: MASTER, path: true, default: '/var/log/brine/syndic' },
  syndic_pidfile: { kind: 'path', roles: MASTER, path: true, default: '/var/run/brine-syndic.pid' },
  order_masters: { kind: 'boolean', roles: MASTER, default: false },
  // Salt's unique_jid: new jids end in `_<pid>` (masters sharing one job cache never mint the same jid).
  unique_jid: { kind: 'boolean', roles: MASTER, default: false },
  master_id: { kind: 'nullable-string', roles: MASTER, default: null },

  // Paths (root_dir is prepended to each `path: true` key).
  root_dir: { kind: 'path', roles: ALL, default: '/' },
  pki_dir: { kind: 'path', roles: ALL, path: true, default: ({ role }: DefaultContext) => `/etc/brine/pki/${role}` },
  cachedir: { kind: 'path', roles: ALL, path: true, default: ({ role }: DefaultContext) => `/var/cache/brine/${sharedWithMaster(role)}` },
  sock_dir: { kind: 'path', roles: ALL, path: true, default: ({ role }: DefaultContext) => `/var/run/brine/${sharedWithMaster(role)}` },
  pidfile: { kind: 'path', roles: ALL, path: true, default: ({ role }: DefaultContext) => `/var/run/brine-${role}.pid` },
  log_file: { kind: 'path', roles: ALL, path: true, default: ({ role }: DefaultContext) => `/var/log/brine/${role}` },
  log_level: { kind: 'log-level', roles: ALL, default: 'warning' },
  // Salt's default is None: the log file then logs at log_level (after -l), as Salt's setup_logging does.
  log_level_logfile: { kind: 'nullable-log-level', roles: ALL, default: null },
  // The daemon drops to this user after binding its ports and reading its keys (when started as root).
  user: { kind: 'string', roles: ALL, default: currentUser },

  // How the CLIs print (Salt's output options; no default means Salt's behaviour when the key is absent).
  output: { kind: 'string', roles: ALL, default: undefined },
  output_indent: { kind: 'output-indent', roles: ALL, default: undefined },
  color: { kind: 'boolean', roles: ALL, default: true },
  strip_colors: { kind: 'boolean', roles: ALL, default: true },
  // `brine` prints Salt's "Summary" block after the returns (as --summary; not with --out, --static or batch mode).
  cli_summary: { kind: 'boolean', roles: MASTER, default: false },

  // PostgreSQL job cache (master_job_cache: postgres), Salt's flat returner keys.
  'postgres.host': { kind: 'string', roles: MASTER, default: 'localhost' },
  'postgres.port': { kind: 'port', roles: MASTER, default: 5432, min: 1 },
  'postgres.db': { kind: 'string', roles: MASTER, default: 'brine' },
  'postgres.user': { kind: 'string', roles: MASTER, default: 'brine' },
  'postgres.pass': { kind: 'string', roles: MASTER, default: '' },
  'postgres.url': { kind: 'nullable-string', roles: MASTER, default: null },
} as const satisfies Record<string, KeySpec>

export type ConfigSchema = typeof CONFIG_SCHEMA
export type ConfigKey = keyof ConfigSchema

type KeysFor<R extends Role> = {
  [K in ConfigKey]: R extends ConfigSchema[K]['roles'][number] ? K : never
}[ConfigKey]

type AbsentKeysFor<R extends Role> = {
  [K in KeysFor<R>]: ConfigSchema[K] extends { readonly absentFor: readonly (infer A)[] } ? (R extends A ? K : never) : never
}[KeysFor<R>]

/** The typed options a role's daemon receives; keys the schema does not know are kept as `unknown`. */
export type ConfigFor<R extends Role> = { [K in Exclude<KeysFor<R>, AbsentKeysFor<R>>]: KindTypes[ConfigSchema[K]['kind']] } & {
  [K in AbsentKeysFor<R>]?: KindTypes[ConfigSchema[K]['kind']]
} & {
  [key: string]: unknown
}

export type MasterConfig = ConfigFor<'master'>
export type MinionConfig = ConfigFor<'minion'>
export type SyndicConfig = ConfigFor<'syndic'>

export function isConfigKey(key: string): key is ConfigKey {
  return Object.hasOwn(CONFIG_SCHEMA, key)
}

export function keySpec(key: string): KeySpec | undefined {
  return isConfigKey(key) ? CONFIG_SCHEMA[key] : undefined
}

/** True when `role`'s daemon reads `key`. */
export function keyAppliesTo(key: string, role: Role): boolean {
  const spec = keySpec(key)
  return spec !== undefined && spec.roles.includes(role)
}

/** The path keys root_dir is prepended to. */
export const PATH_KEYS: readonly ConfigKey[] = (Object.keys(CONFIG_SCHEMA) as ConfigKey[]).filter((key) => (CONFIG_SCHEMA[key] as KeySpec).path === true)

/** A role's defaults, before any file is read. */
export function defaultsFor(role: Role, configDir = '/etc/brine'): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, spec] of Object.entries(CONFIG_SCHEMA) as Array<[string, KeySpec]>) {
    if (!spec.roles.includes(role)) continue
    // A key without a default (`output`, `output_indent`) is absent until a file or flag sets it.
    if (spec.default === undefined || spec.absentFor?.includes(role) === true) continue
    out[key] = typeof spec.default === 'function' ? (spec.default as (context: DefaultContext) => unknown)({ role, configDir }) : spec.default
  }
  return out
}
