// What the minion's one-file build gives the NATS client (@nats-io/transport-node) for `node:tls` (see ../../tsup.config.ts):
// the client requires Node's tls module as it loads, to open a TLS connection and to tell whether its socket is one,
// and a loaded tls module stays resident in the process (its code, and the binary's pages it touches: docs/performance.md,
// "An idle minion, fourth pass"). Here it is loaded at the first TLS connection, so a minion whose broker speaks plain
// NATS never holds it.
import type * as Tls from 'node:tls'

let tls: typeof Tls | undefined
const loaded = (): typeof Tls => (tls ??= process.getBuiltinModule('node:tls'))

/** `tls.connect`, loading the module at the first call. */
export const connect = ((...args: Parameters<typeof Tls.connect>) => loaded().connect(...args)) as typeof Tls.connect

/**
 * Stands in for `tls.TLSSocket` in the client's `socket instanceof TLSSocket` (asked at each server INFO): a socket is
 * one only once the module is loaded, since the client makes its TLS sockets with {@link connect}.
 */
export class TLSSocket {
  static [Symbol.hasInstance](value: unknown): boolean {
    return tls !== undefined && value instanceof tls.TLSSocket
  }
}
