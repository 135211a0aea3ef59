import { hostname, userInfo } from 'node:os'
import type { LogLevel } from '@brine/transport'

/** The daemons that read a config file; each reads `<configDir>/<role>`. */
export type Role = 'master' | 'minion' | 'syndic'
export const ROLES: readonly Role[] = ['master', 'minion', 'syndic']

/** The transports a config may name, exactly as Salt spells them. */
export const BUILTIN_TRANSPORTS = ['tcp', 'zeromq'] as const
export type TransportName = (typeof BUILTIN_TRANSPORTS)[number]

/**
 * Value kinds the schema checks. `port` is an integer 0..65535 (0 binds a free port);
 * `string-or-list` is Salt's `master: host` or `master: [a, b]`.
 */
export type ValueKind =
  | 'string'
  | 'nullable-string'
  | 'integer'
  | 'number'
  | 'port'
  | 'boolean'
  | 'map'
  | 'string-or-list'
  | 'transport'
  | 'nullable-transport'
  | 'transport-opts'
  | 'log-level'
  | 'output-indent'
  | 'nullable-log-level'

export interface KindTypes {
  string: string
  'nullable-string': string | null
  integer: number
  number: number
  port: number
  boolean: boolean
  map: Record<string, unknown>
  'string-or-list': string | string[]
  transport: TransportName
  'nullable-transport': TransportName | null
  'transport-opts': Record<string, Record<string, unknown>>
  'log-level': LogLevel
  'output-indent': number | string | null
  'nullable-log-level': LogLevel | null
}

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
}

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
  publish_port: { kind: 'port', roles: ALL, default: 4505 },
  ret_port: { kind: 'port', roles: MASTER, default: 4506 },
  transport: { kind: 'transport', roles: ALL, default: 'zeromq' },
  transport_opts: { kind: 'transport-opts', roles: ALL, default: () => ({}) },
  zmq_filtering: { kind: 'boolean', roles: ALL, default: false },
  pub_hwm: { kind: 'integer', roles: ALL, default: 1000 },
  max_frame_bytes: { kind: 'integer', roles: ALL, default: 67108864, unit: 'bytes' },
  ipv6: { kind: 'boolean', roles: ALL, default: false },

  // Master workers and jobs.
  worker_threads: { kind: 'integer', roles: MASTER, default: 5 },
  timeout: { kind: 'number', roles: MASTER, default: 5, unit: 'seconds' },
  gather_job_timeout: { kind: 'number', roles: MASTER, default: 10, unit: 'seconds' },
  keep_jobs: { kind: 'number', roles: MASTER, default: 24, unit: 'hours' },
  // `brine` switches to batch mode when a target matches at least batch_safe_limit minions (0 or 1: never),
  // with batches of batch_safe_size: a count or a percentage ('10%'), so a string as Salt's CLI reads it.
  batch_safe_limit: { kind: 'integer', roles: MASTER, default: 0 },
  batch_safe_size: { kind: 'string', roles: MASTER, default: '8' },
  master_job_cache: { kind: 'string', roles: MASTER, default: 'local_cache' },
  job_cache: { kind: 'boolean', roles: MASTER, default: true },
  nodegroups: { kind: 'map', roles: ALL, default: () => ({}) },
  file_roots: { kind: 'map', roles: ALL, default: () => ({ base: ['/srv/brine'] }) },
  external_auth: { kind: 'map', roles: MASTER, default: () => ({}) },
  rest_api: { kind: 'map', roles: MASTER, default: () => ({ port: 8000, host: '0.0.0.0' }) },

  // Keys and security.
  auto_accept: { kind: 'boolean', roles: MASTER, default: false },
  open_mode: { kind: 'boolean', roles: MASTER, default: false },
  publish_session: { kind: 'number', roles: MASTER, default: 86400, unit: 'seconds' },
  sign_pub_messages: { kind: 'boolean', roles: ALL, default: true },
  master_finger: { kind: 'string', roles: MINION, default: '' },

  // Identity and the minion's masters.
  id: { kind: 'string', roles: ALL, default: defaultId },
  master: { kind: 'string-or-list', roles: MINION_ONLY, default: 'salt' },
  master_port: { kind: 'port', roles: MINION_ONLY, default: 4506 },
  master_type: { kind: 'string', roles: MINION_ONLY, default: 'str', values: ['str', 'failover', 'func', 'disable'] },
  grains: { kind: 'map', roles: MINION, default: () => ({}) },
  multiprocessing: { kind: 'boolean', roles: MINION_ONLY, default: true },

  // Minion retries and reconnects.
  return_retry_timer: { kind: 'number', roles: MINION, default: 5, unit: 'seconds' },
  return_retry_timer_max: { kind: 'number', roles: MINION, default: 10, unit: 'seconds' },
  return_retry_tries: { kind: 'integer', roles: MINION, default: 3 },
  recon_default: { kind: 'integer', roles: MINION, default: 1000, unit: 'milliseconds' },
  recon_max: { kind: 'integer', roles: MINION, default: 10000, unit: 'milliseconds' },
  recon_randomize: { kind: 'boolean', roles: MINION, default: true },
  acceptance_wait_time: { kind: 'number', roles: MINION, default: 10, unit: 'seconds' },
  acceptance_wait_time_max: { kind: 'number', roles: MINION, default: 0, unit: 'seconds' },
  auth_tries: { kind: 'integer', roles: MINION, default: 7 },
  auth_timeout: { kind: 'number', roles: MINION, default: 5, unit: 'seconds' },

  // Syndic and multi-master. The syndic's keys live in the master's config file (as in Salt), so the
  // master reads them without a warning; `order_masters` and `syndic_wait` are the upper master's.
  syndic_master: { kind: 'string-or-list', roles: MASTER, default: 'masterofmasters' },
  syndic_master_port: { kind: 'port', roles: MASTER, default: 4506 },
  // Until the auth reply carries the upper master's publish port, the syndic is told it.
  syndic_master_publish_port: { kind: 'port', roles: MASTER, default: 4505 },
  // The transport of the syndic's link to its upper master (null: the master's own `transport`).
  syndic_transport: { kind: 'nullable-transport', roles: MASTER, default: null },
  syndic_finger: { kind: 'string', roles: MASTER, default: '' },
  syndic_failover: { kind: 'string', roles: MASTER, default: 'random', values: ['random', 'ordered'] },
  syndic_wait: { kind: 'number', roles: MASTER, default: 5, unit: 'seconds' },
  syndic_event_forward_timeout: { kind: 'number', roles: MASTER, default: 0.5, unit: 'seconds' },
  syndic_jid_forward_cache_hwm: { kind: 'integer', roles: MASTER, default: 100 },
  // Returns the syndic could not forward wait on disk, up to this many bytes (then new ones are refused, logged).
  syndic_spool_max_bytes: { kind: 'integer', roles: MASTER, default: 268435456, unit: 'bytes' },
  syndic_log_file: { kind: 'string', roles: MASTER, path: true, default: '/var/log/brine/syndic' },
  syndic_pidfile: { kind: 'string', roles: MASTER, path: true, default: '/var/run/brine-syndic.pid' },
  order_masters: { kind: 'boolean', roles: MASTER, default: false },
  master_id: { kind: 'nullable-string', roles: MASTER, default: null },

  // Paths (root_dir is prepended to each `path: true` key).
  root_dir: { kind: 'string', roles: ALL, default: '/' },
  pki_dir: { kind: 'string', roles: ALL, path: true, default: ({ role }: DefaultContext) => `/etc/brine/pki/${role}` },
  cachedir: { kind: 'string', roles: ALL, path: true, default: ({ role }: DefaultContext) => `/var/cache/brine/${sharedWithMaster(role)}` },
  sock_dir: { kind: 'string', roles: ALL, path: true, default: ({ role }: DefaultContext) => `/var/run/brine/${sharedWithMaster(role)}` },
  pidfile: { kind: 'string', roles: ALL, path: true, default: ({ role }: DefaultContext) => `/var/run/brine-${role}.pid` },
  log_file: { kind: 'string', roles: ALL, path: true, default: ({ role }: DefaultContext) => `/var/log/brine/${role}` },
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

  // PostgreSQL job cache (master_job_cache: postgres), Salt's flat returner keys.
  'postgres.host': { kind: 'string', roles: MASTER, default: 'localhost' },
  'postgres.port': { kind: 'port', roles: MASTER, default: 5432 },
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

/** The typed options a role's daemon receives; keys the schema does not know are kept as `unknown`. */
export type ConfigFor<R extends Role> = { [K in KeysFor<R>]: KindTypes[ConfigSchema[K]['kind']] } & {
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
export const PATH_KEYS: readonly ConfigKey[] = (Object.keys(CONFIG_SCHEMA) as ConfigKey[]).filter(
  (key) => (CONFIG_SCHEMA[key] as KeySpec).path === true,
)

/** A role's defaults, before any file is read. */
export function defaultsFor(role: Role, configDir = '/etc/brine'): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, spec] of Object.entries(CONFIG_SCHEMA) as Array<[string, KeySpec]>) {
    if (!spec.roles.includes(role)) continue
    // A key without a default (`output`, `output_indent`) is absent until a file or flag sets it.
    if (spec.default === undefined) continue
    out[key] = typeof spec.default === 'function' ? (spec.default as (context: DefaultContext) => unknown)({ role, configDir }) : spec.default
  }
  return out
}
