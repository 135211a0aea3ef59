import { getTransport, listTransports, registeredPeerSockets, registerTransport } from '@brine/transport'
import type { Transport } from '@brine/transport'

/** What to tell an operator whose ZeroMQ native addon failed to load. */
export const ZEROMQ_UNAVAILABLE_HINT =
  'the zeromq native addon did not load; reinstall with install scripts enabled ' + '(npm install --foreground-scripts zeromq) or set `transport: tcp`'

/**
 * The composition root for the built-in transports: registers `zeromq`, `tcp` and `nats` with lazy
 * `import()` loaders, so a broken native addon only hurts users who chose ZeroMQ. Idempotent:
 * names already registered (by an earlier call or by a test) are left as they are.
 */
export function registerBuiltinTransports(): void {
  const registered = new Set(listTransports())
  if (!registered.has('zeromq')) {
    registerTransport('zeromq', () => import('@brine/transport-zeromq').then((module) => module.zeromqTransport() as Transport), {
      hint: ZEROMQ_UNAVAILABLE_HINT,
    })
  }
  if (!registered.has('nats')) {
    // Each endpoint brings its own servers, prefix and credentials (`broker`, from nats_* config keys).
    registerTransport('nats', () => import('@brine/transport-nats').then((module) => module.natsTransport() as Transport), {
      hint: 'check the installation of @brine/transport-nats (and its @nats-io/transport-node dependency)',
      // A broker's: said here too, so that reaching a master's local channel does not load the NATS client.
      peerSockets: false,
    })
  }
  if (!registered.has('tcp')) {
    registerTransport('tcp', () => import('@brine/transport-tcp').then((module) => module.tcpTransport() as Transport), {
      hint: 'check the installation of @brine/transport-tcp',
    })
  }
}

/**
 * Registers the built-ins, then loads `name`. Throws UnknownTransportError (with "did you mean")
 * for an unknown name and TransportUnavailableError (with the hint and the load failure as
 * `cause`) when the package cannot be loaded. `source` (`/etc/brine/master:4`) goes into the error.
 */
export async function loadTransport(name: string, source?: string): Promise<Transport> {
  registerBuiltinTransports()
  return getTransport(name, source === undefined ? {} : { source })
}

/** The transport whose framing a broker transport's local channel speaks on its unix socket. */
export const LOCAL_CHANNEL_SOCKET_TRANSPORT = 'tcp'

/**
 * The transport that serves, and reaches, a master's local channel (`ret_<name>.ipc` under sock_dir) for `transport`:
 * `transport` itself when its servers own sockets, else (a broker's, NATS: `peerSockets: false`) TCP's framing on that
 * unix socket. The operator on the master's host then reaches the master without crossing the broker, as over the
 * socket transports: one hop instead of two each way, and no queue shared with the fleet's returns.
 */
export async function localChannelTransport(transport: Transport): Promise<Transport> {
  return transport.peerSockets === false ? loadTransport(LOCAL_CHANNEL_SOCKET_TRANSPORT) : transport
}

/**
 * {@link localChannelTransport} for the transport named `name` (a config's `transport`), loading a broker transport not
 * at all when its registration says it is one: a command on the master's host that reaches the master through its
 * local channel never uses the broker's client, whose library cost every `brine` run on a NATS master its loading.
 * An unknown name fails as {@link loadTransport} fails.
 */
export async function loadLocalChannelTransport(name: string, source?: string): Promise<Transport> {
  registerBuiltinTransports()
  if (registeredPeerSockets(name) === false) return loadTransport(LOCAL_CHANNEL_SOCKET_TRANSPORT)
  return localChannelTransport(await loadTransport(name, source))
}
