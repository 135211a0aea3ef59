import { join } from 'node:path'

/** One event on the master's bus, as Salt's `iter_events` yields it. */
export interface BusEvent {
  tag: string
  data: Record<string, unknown> & { _stamp?: string }
}

let stampedAt = Number.NaN
let stampText = ''

/**
 * An event's `_stamp`: the time as ISO 8601, the same text for every event of one millisecond (a busy master
 * stamps thousands of events a second, and formatting a date is most of what stamping one costs).
 */
export function eventStamp(now: number = Date.now()): string {
  if (now !== stampedAt) {
    stampedAt = now
    stampText = new Date(now).toISOString()
  }
  return stampText
}

/** File name of the master's event bus socket under sock_dir (Salt's name). */
export const EVENT_BUS_SOCKET = 'master_event_pub.ipc'

/** Longest unix socket path Linux accepts (sun_path is 108 bytes with its NUL). */
export const MAX_UNIX_SOCKET_PATH = 107

export function eventBusPath(sockDir: string): string {
  return join(sockDir, EVENT_BUS_SOCKET)
}

/**
 * The master's local request channel for `transport` under sock_dir: the same request handler as
 * `ret_port`, on a unix socket only the master's user can open, so no remote peer can fill it. The
 * local client (CLI, LocalClient, runner and wheel clients) uses it when it exists.
 */
export function localRequestPath(sockDir: string, transport: string): string {
  return join(sockDir, `ret_${transport}.ipc`)
}
