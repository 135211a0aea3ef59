import { join } from 'node:path'

/** One event on the master's bus, as Salt's `iter_events` yields it. */
export interface BusEvent {
  tag: string
  data: Record<string, unknown> & { _stamp?: string }
}

/** File name of the master's event bus socket under sock_dir (Salt's name). */
export const EVENT_BUS_SOCKET = 'master_event_pub.ipc'

/** Longest unix socket path Linux accepts (sun_path is 108 bytes with its NUL). */
export const MAX_UNIX_SOCKET_PATH = 107

export function eventBusPath(sockDir: string): string {
  return join(sockDir, EVENT_BUS_SOCKET)
}
