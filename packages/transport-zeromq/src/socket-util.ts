import { createHash } from 'node:crypto'

/** The topic every subscriber takes and every broadcast carries. */
export const BROADCAST_TOPIC = 'broadcast'

/**
 * The topic of a targeted publish: the hex SHA-1 of the minion id (Salt's zmq_filtering).
 * Fixed length, so one id's topic is never a prefix of another's, and never of `broadcast`.
 */
export function topicForId(id: string): string {
  return createHash('sha1').update(id).digest('hex')
}

/** `tcp://host:port`, with IPv6 hosts in brackets; `port` may be `*` for an ephemeral bind. */
export function formatEndpoint(host: string, port: number | '*'): string {
  return `tcp://${isIPv6(host) ? `[${host}]` : host}:${port}`
}

/** An endpoint's ZeroMQ address: `ipc://path` for a unix socket, else `tcp://host:port`. */
export function endpointOf(options: { host: string; port: number; path?: string }): string {
  return options.path === undefined ? formatEndpoint(options.host, options.port) : `ipc://${options.path}`
}

export function isIPv6(host: string): boolean {
  return host.includes(':')
}

/** Total bytes of a multipart message, for frame-drop events. */
export function messageSize(frames: readonly Uint8Array[]): number {
  let size = 0
  for (const frame of frames) size += frame.length
  return size
}
