/**
 * A minion's masters as its config names them: Salt's `master` (one host or a list), `master_type`
 * and `master_finger`, and a syndic's upper masters (`syndic_master`, read the same way). The checks
 * that span those keys live here, once, for the config loader (which knows each key's file and line)
 * and for a daemon given options directly (which does not).
 */
import type { MasterFinger } from './config-schema.js'
import { ConfigError, formatSource, type ConfigSource } from './errors.js'

/** The keys these checks read; anything else in the options is ignored. */
export interface MinionMastersConfig {
  master?: unknown
  syndic_master?: unknown
  master_type?: unknown
  master_finger?: unknown
}

type SourceOf = (key: string) => ConfigSource | undefined

function problem(message: string, key: string, where: ConfigSource | undefined): ConfigError {
  const prefix = where === undefined ? '' : `${formatSource(where)}: `
  return new ConfigError(`${prefix}${message}`, { key, file: where?.file, line: where?.line })
}

/** The key naming the masters: a minion's `master`, a syndic's `syndic_master`. */
export type MastersKey = 'master' | 'syndic_master'

/** The entries of `key` (a host or a list of hosts), in order, or a ConfigError saying what is wrong with them. */
function listMasters(opts: MinionMastersConfig, sourceOf: SourceOf, key: MastersKey = 'master'): string[] | ConfigError {
  const value = opts[key]
  const masters: unknown[] = Array.isArray(value) ? value : [value]
  const where = sourceOf(key)
  if (masters.length === 0) return problem(`${key} must name at least one master, got an empty list`, key, where)
  const bad = masters.findIndex((host) => typeof host !== 'string' || host.trim() === '')
  if (bad >= 0) return problem(`${key} must name each master by a non-empty host, entry ${bad + 1} is ${JSON.stringify(masters[bad]) ?? 'missing'}`, key, where)
  const hosts = masters as string[]
  const badPort = hosts.find((host) => masterAddressOf(host, 0) === undefined)
  if (badPort !== undefined) return problem(`${key} entry '${badPort}' names a port that is not a number from 1 to 65535 (host:port, [IPv6]:port)`, key, where)
  const twice = hosts.find((host, index) => hosts.indexOf(host) !== index)
  if (twice !== undefined) return problem(`${key} lists '${twice}' twice; each master may appear once`, key, where)
  return hosts
}

/**
 * One entry of `master` as a host and a port, as Salt's `parse_host_port` reads it: `host:port`, `[v6]:port`
 * or `[v6]` (brackets dropped), or a bare host (an IPv6 address without brackets is a host) on `defaultPort`
 * (`master_port`). Undefined when the port given is not a number from 1 to 65535. Masters of one minion may so
 * differ in port: on a broker (NATS) the port is what tells two masters on one cluster apart.
 */
export function masterAddressOf(entry: string, defaultPort: number): { host: string; port: number } | undefined {
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(entry)
  const [host, port] =
    bracketed !== null ? [bracketed[1]!, bracketed[2]] : entry.split(':').length === 2 ? (entry.split(':') as [string, string]) : [entry, undefined]
  if (port === undefined) return { host, port: defaultPort }
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535 || host === '') return undefined
  return { host, port: Number(port) }
}

/**
 * The masters of `key` (default `master`: a host, or a list of hosts for `master_type` str or failover;
 * `syndic_master`: a syndic's upper masters), in order. Throws ConfigError when the list is empty, holds
 * something that is not a host, or names a master twice.
 */
export function mastersOf(opts: MinionMastersConfig, key: MastersKey = 'master'): string[] {
  const masters = listMasters(opts, () => undefined, key)
  if (masters instanceof ConfigError) throw masters
  return masters
}

/** The problems of a syndic's `syndic_master` (as {@link mastersOf} finds them), each naming the key, file and line. */
export function checkSyndicMasters(opts: MinionMastersConfig, sourceOf: SourceOf = () => undefined): ConfigError[] {
  const masters = listMasters(opts, sourceOf, 'syndic_master')
  return masters instanceof ConfigError ? [masters] : []
}

/**
 * Every problem across `master`, `master_type` and `master_finger`: no master or a master listed
 * twice; `master_type: failover` with a single master given as a string (Salt's docs require a
 * list; Salt itself quietly wraps it, issue 23611); a `master_finger` list whose length is not the
 * number of masters; a `master_finger` mapping naming a master that `master` does not list.
 * `sourceOf(key)` tells where a key was set, so each error names the key, the file and the line.
 */
export function checkMinionMasters(opts: MinionMastersConfig, sourceOf: SourceOf = () => undefined): ConfigError[] {
  const masters = listMasters(opts, sourceOf)
  if (masters instanceof ConfigError) return [masters]
  const errors: ConfigError[] = []
  if (opts.master_type === 'failover' && typeof opts.master === 'string') {
    // Point at the line to change: `master` where a file set it, else the `master_type` that asked for a list.
    const where = sourceOf('master') ?? sourceOf('master_type')
    errors.push(
      problem(
        `master_type failover needs master to be a list of masters to fail over between (master: [${opts.master}, other]), got the single master '${opts.master}'`,
        'master',
        where,
      ),
    )
  }
  const finger = opts.master_finger
  const fingerWhere = sourceOf('master_finger')
  if (Array.isArray(finger) && finger.length !== masters.length) {
    errors.push(
      problem(
        `master_finger lists ${finger.length} fingerprint${finger.length === 1 ? '' : 's'} for ${masters.length} master${masters.length === 1 ? '' : 's'}; ` +
          `give one per entry of master, in the same order ('' to pin on first contact), or a mapping of master to fingerprint`,
        'master_finger',
        fingerWhere,
      ),
    )
  } else if (typeof finger === 'object' && finger !== null && !Array.isArray(finger)) {
    const unknown = Object.keys(finger).filter((name) => !masters.includes(name))
    if (unknown.length > 0) {
      errors.push(
        problem(
          `master_finger names ${unknown.map((name) => `'${name}'`).join(', ')}, which master does not list (masters: ${masters.join(', ')})`,
          'master_finger',
          fingerWhere,
        ),
      )
    }
  }
  return errors
}

/**
 * The fingerprint that pins the master at `index` of `masters`: the one `master_finger` string for
 * every master, the list's entry at that position, or the mapping's entry for that master. '' (pin
 * whatever answers first) when none is given.
 */
export function masterFingerFor(finger: MasterFinger | undefined, masters: readonly string[], index: number): string {
  if (finger === undefined) return ''
  if (typeof finger === 'string') return finger
  if (Array.isArray(finger)) return finger[index] ?? ''
  const host = masters[index]
  return host !== undefined && Object.hasOwn(finger, host) ? (finger[host] ?? '') : ''
}
