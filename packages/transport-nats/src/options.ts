import { readFileSync } from 'node:fs'
import { credsAuthenticator, nkeyAuthenticator, type ConnectionOptions } from '@nats-io/transport-node'
import type { BrokerOptions } from '@brine/transport'
import { NatsOptionsError } from './errors.js'
import { DEFAULT_SUBJECT_PREFIX, checkSubjectPrefix } from './subjects.js'

/** `nats_servers` when none is configured. */
export const DEFAULT_NATS_SERVERS: readonly string[] = ['nats://127.0.0.1:4222']

/** The broker options an endpoint connects with: its own over the transport's defaults, checked. */
export interface ResolvedBroker extends BrokerOptions {
  servers: readonly string[]
  subjectPrefix: string
}

export function resolveBroker(defaults: BrokerOptions, own: BrokerOptions | undefined): ResolvedBroker {
  const merged: BrokerOptions = { ...defaults, ...definedOnly(own ?? {}) }
  const servers = merged.servers === undefined || merged.servers.length === 0 ? DEFAULT_NATS_SERVERS : merged.servers
  for (const url of servers) {
    if (!/^(nats|tls|ws|wss):\/\/[^\s]+$|^[^\s:/]+(:\d+)?$/.test(url))
      throw new NatsOptionsError('nats_servers', `'${url}' is not a NATS server URL (nats://host:4222)`)
  }
  if (merged.user !== undefined && merged.token !== undefined)
    throw new NatsOptionsError('nats_token', 'set either nats_user/nats_password or nats_token, not both')
  return { ...merged, servers, subjectPrefix: checkSubjectPrefix(merged.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX) }
}

function definedOnly(options: BrokerOptions): BrokerOptions {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as BrokerOptions
}

function readKeyFile(key: string, path: string): string {
  try {
    return readFileSync(path, 'utf8').trim()
  } catch (error) {
    throw new NatsOptionsError(key, `cannot read ${path}: ${(error as Error).message}`, { cause: error })
  }
}

/**
 * The nats.js options for `broker`, reconnect left to the caller. Credential files are read here,
 * so a missing one is an error at start naming its key, not a refusal from the server later.
 */
export function connectionOptions(broker: ResolvedBroker, name: string): ConnectionOptions {
  const options: ConnectionOptions = { servers: [...broker.servers], name, ignoreClusterUpdates: false }
  if (broker.user !== undefined) options.user = broker.user
  if (broker.password !== undefined) options.pass = broker.password
  if (broker.token !== undefined) options.token = broker.token
  if (broker.credsFile !== undefined) {
    options.authenticator = credsAuthenticator(new TextEncoder().encode(readKeyFile('nats_creds_file', broker.credsFile)))
  } else if (broker.nkeySeedFile !== undefined) {
    options.authenticator = nkeyAuthenticator(new TextEncoder().encode(readKeyFile('nats_nkey_seed_file', broker.nkeySeedFile)))
  }
  if (broker.tlsCa !== undefined || broker.tlsCert !== undefined || broker.tlsKey !== undefined) {
    options.tls = {
      ...(broker.tlsCa === undefined ? {} : { caFile: broker.tlsCa }),
      ...(broker.tlsCert === undefined ? {} : { certFile: broker.tlsCert }),
      ...(broker.tlsKey === undefined ? {} : { keyFile: broker.tlsKey }),
    }
  }
  return options
}
