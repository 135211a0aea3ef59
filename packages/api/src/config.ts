import { ConfigError, eauthLimitsFromConfig, secondsToMs, serverLimitsFromConfig, type LoginLimits, type MasterConfig } from '@brine/config'
import type { DecodeLimits } from '@brine/core'

/** The REST API's settings: Salt's `rest_cherrypy` keys, checked, with Salt's defaults. */
export interface ApiSettings {
  port: number
  host: string
  /** TLS certificate and key files; both unset only with `disable_ssl`. */
  sslCrt?: string
  sslKey?: string
  disableSsl: boolean
  /** Where webhooks are posted (Salt's `webhook_url`, default /hook). */
  webhookUrl: string
  webhookDisableAuth: boolean
  /** Largest request body accepted, bytes (Salt's default 1 MiB); larger ones get 413. */
  maxRequestBodySize: number
  /** Errors carry their stack in the 500 body. */
  debug: boolean
  /** Client addresses allowed in; others get 403 (empty: everyone). */
  authorizedIps: string[]
  /** Whether login sets the `session_id` cookie (Salt's `enable_sessions`). */
  enableSessions: boolean
  /** `/stats` without a token (Salt's `stats_disable_auth`). */
  statsDisableAuth: boolean
  /** Brine: bytes one `/events` stream may hold for a slow reader before it drops events (counted). */
  eventsBufferBytes: number
  /** Brine: `/events` streams open at once; more get 503. */
  eventsMaxStreams: number
  /** Brine: how often a stream's token is checked again with the master (revocation), ms. */
  eventsTokenRecheckMs: number
  /** The clients `POST /` and friends may use (the master's `netapi_enable_clients`). */
  enabledClients: string[]
  /** Failed logins per user name and per client address (the master's `eauth_rate_limit_*`); more get 429. */
  loginLimits: LoginLimits
  /** Entries and depth a request body may have (the master's `max_frame_entries`, `max_frame_depth`); more get 413 or 400. */
  bodyLimits: DecodeLimits
  /** The web app at {@link ApiSettings.appPath}: the bundled console, an HTML file (Salt's `app`, e.g. SaltGUI's index.html), or off (`app: false`). */
  app: { kind: 'console' } | { kind: 'file'; file: string } | { kind: 'off' }
  /** The URL prefix of the app (Salt's `app_path`, default /app). */
  appPath: string
  /** A directory of static assets (Salt's `static`), served at {@link ApiSettings.staticPath}. */
  staticDir?: string
  /** The URL prefix of `static` (Salt's `static_path`, default /static). */
  staticPath: string
}

/** The clients Brine's API implements (Salt 3006's NetapiClient, without ssh). */
export const API_CLIENTS = ['local', 'local_async', 'local_batch', 'local_subset', 'runner', 'runner_async', 'wheel', 'wheel_async'] as const
export type ApiClientName = (typeof API_CLIENTS)[number]

const KNOWN = new Set([
  'port',
  'host',
  'ssl_crt',
  'ssl_key',
  'ssl_chain',
  'disable_ssl',
  'webhook_url',
  'webhook_disable_auth',
  'max_request_body_size',
  'debug',
  'authorized_ips',
  'enable_sessions',
  'stats_disable_auth',
  'collect_stats',
  'thread_pool',
  'socket_queue_size',
  'events_buffer_bytes',
  'events_max_streams',
  'events_token_recheck',
  'app',
  'app_path',
  'static',
  'static_path',
])

/** The API's own endpoints, which `app_path` and `static_path` may not shadow. */
const RESERVED_PATHS = ['/login', '/logout', '/token', '/run', '/minions', '/jobs', '/keys', '/hook', '/stats', '/events', '/ws']

/** `app`: unset or true → the bundled console; false → no app; a string → that HTML file (SaltGUI's way). */
function appSetting(value: unknown, fail: (key: string, problem: string) => never): ApiSettings['app'] {
  if (value === undefined || value === null || value === true) return { kind: 'console' }
  if (value === false) return { kind: 'off' }
  if (typeof value === 'string' && value !== '') return { kind: 'file', file: value }
  return fail('app', `must be false, true (the bundled console) or the path of an HTML file, got ${JSON.stringify(value)}`)
}

/** `app_path`, `static_path`: one absolute URL prefix, kept without a trailing slash, never the API's own root. */
function urlPrefix(key: string, value: string, fail: (key: string, problem: string) => never): string {
  const trimmed = value.replace(/\/+$/, '')
  if (!/^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/.test(trimmed))
    fail(key, `must be a URL path such as /app (letters, digits, . _ ~ -), got ${JSON.stringify(value)}`)
  return trimmed
}

type Fail = (key: string, problem: string) => never

/** Readers of the block's values by type, each failing with the key and what it must be. */
function blockReaders(block: Record<string, unknown>, fail: Fail) {
  return {
    integer: (key: string, fallback: number | undefined, min: number, max: number): number => {
      const value = block[key] ?? fallback
      if (value === undefined) return fail(key, `is required (an integer from ${min} to ${max})`)
      if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
        return fail(key, `must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`)
      return value
    },
    flag: (key: string, fallback: boolean): boolean => {
      const value = block[key] ?? fallback
      return typeof value === 'boolean' ? value : fail(key, `must be true or false, got ${JSON.stringify(value)}`)
    },
    text: (key: string): string | undefined => {
      const value = block[key]
      if (value === undefined || value === null) return undefined
      return typeof value === 'string' && value !== '' ? value : fail(key, `must be a non-empty string, got ${JSON.stringify(value)}`)
    },
  }
}

/** `app_path` and `static_path` take none of the API's own paths. */
function checkPrefixes(settings: ApiSettings, fail: Fail): void {
  for (const [key, prefix] of [
    ['app_path', settings.appPath],
    ['static_path', settings.staticPath],
  ] as const) {
    const first = `/${prefix.split('/')[1] ?? ''}`
    if (RESERVED_PATHS.includes(first) || first === settings.webhookUrl.replace(/\/+$/, ''))
      fail(key, `must not take the API's own path ${first}, got ${JSON.stringify(prefix)}`)
  }
}

/** `ssl_crt` and `ssl_key`: both required unless `disable_ssl`. */
function readTls(settings: ApiSettings, text: (key: string) => string | undefined, fail: Fail): void {
  const crt = text('ssl_crt')
  const key = text('ssl_key')
  if (crt !== undefined) settings.sslCrt = crt
  if (key !== undefined) settings.sslKey = key
  if (!settings.disableSsl && (crt === undefined || key === undefined)) {
    fail(crt === undefined ? 'ssl_crt' : 'ssl_key', 'is required unless disable_ssl is true (a certificate and its key, e.g. made with openssl req -x509)')
  }
}

/** `authorized_ips`: a list of addresses, or unset (everyone). */
function readAuthorizedIps(block: Record<string, unknown>, fail: Fail): string[] {
  const ips = block['authorized_ips']
  if (ips === undefined || ips === null) return []
  if (!Array.isArray(ips) || !ips.every((ip) => typeof ip === 'string')) fail('authorized_ips', 'must be a list of IP addresses')
  return ips as string[]
}

/** The master's `netapi_enable_clients`, keeping the clients the API has; a name it does not have is a warning. */
function readEnabledClients(opts: MasterConfig, warnings: string[]): string[] {
  const enabled = (opts.netapi_enable_clients ?? []) as unknown
  if (!Array.isArray(enabled) || !enabled.every((name) => typeof name === 'string'))
    throw new ConfigError('netapi_enable_clients must be a list of client names', { key: 'netapi_enable_clients' })
  const known = (name: string): boolean => (API_CLIENTS as readonly string[]).includes(name)
  for (const name of enabled as string[]) {
    if (!known(name)) warnings.push(`netapi_enable_clients: '${name}' is not a client Brine's API has (${API_CLIENTS.join(', ')}); ignored`)
  }
  return (enabled as string[]).filter(known)
}

/**
 * Reads `rest_cherrypy` (and `netapi_enable_clients`) from the master's config. `port` is required;
 * `ssl_crt` and `ssl_key` too unless `disable_ssl: true`. A wrong value is a ConfigError naming
 * `rest_cherrypy.<key>`; an unknown key is returned as a warning.
 */
export function apiSettings(opts: MasterConfig): { settings: ApiSettings; warnings: string[] } {
  const block = (opts.rest_cherrypy ?? {}) as Record<string, unknown>
  const warnings: string[] = []
  const fail: Fail = (key, problem) => {
    throw new ConfigError(`rest_cherrypy.${key} ${problem}`, { key: `rest_cherrypy.${key}` })
  }
  for (const key of Object.keys(block)) if (!KNOWN.has(key)) warnings.push(`rest_cherrypy.${key}: unknown setting; ignored`)
  const { integer, flag, text } = blockReaders(block, fail)
  const settings: ApiSettings = {
    port: integer('port', undefined, 0, 65535),
    host: text('host') ?? '0.0.0.0',
    disableSsl: flag('disable_ssl', false),
    webhookUrl: text('webhook_url') ?? '/hook',
    webhookDisableAuth: flag('webhook_disable_auth', false),
    maxRequestBodySize: integer('max_request_body_size', 1_048_576, 1, 2 ** 31 - 1),
    debug: flag('debug', false),
    authorizedIps: [],
    enableSessions: flag('enable_sessions', true),
    statsDisableAuth: flag('stats_disable_auth', false),
    eventsBufferBytes: integer('events_buffer_bytes', 1_048_576, 1024, 2 ** 31 - 1),
    eventsMaxStreams: integer('events_max_streams', 1024, 1, 1_000_000),
    eventsTokenRecheckMs: secondsToMs(block['events_token_recheck'] ?? 5, 'rest_cherrypy.events_token_recheck'),
    enabledClients: [],
    loginLimits: eauthLimitsFromConfig(opts),
    bodyLimits: (({ maxFrameEntries, maxFrameDepth }) => ({ maxEntries: maxFrameEntries, maxDepth: maxFrameDepth }))(serverLimitsFromConfig(opts)),
    app: appSetting(block['app'], fail),
    appPath: urlPrefix('app_path', text('app_path') ?? '/app', fail),
    staticPath: urlPrefix('static_path', text('static_path') ?? '/static', fail),
  }
  checkPrefixes(settings, fail)
  const staticDir = text('static')
  if (staticDir !== undefined) settings.staticDir = staticDir
  if (settings.app.kind !== 'off' && settings.staticDir !== undefined && settings.appPath === settings.staticPath)
    fail('static_path', `must differ from app_path (both are ${settings.appPath})`)
  readTls(settings, text, fail)
  if (!settings.webhookUrl.startsWith('/')) fail('webhook_url', `must start with '/', got ${JSON.stringify(settings.webhookUrl)}`)
  settings.authorizedIps = readAuthorizedIps(block, fail)
  settings.enabledClients = readEnabledClients(opts, warnings)
  return { settings, warnings }
}
