/** The part of a daemon's options that choose transports, as Salt's config spells them. */
export interface TransportSelection {
  transport: string
  transport_opts?: Record<string, Record<string, unknown> | null | undefined>
}

/**
 * Salt's `iter_transport_opts`: one `[name, options]` per `transport_opts` entry, its overrides
 * merged over the base options (and `transport` set to the entry's name), then the base
 * `transport` itself if no entry named it. One master serves every transport this yields.
 */
export function* iterTransportOpts<T extends TransportSelection>(opts: T): Generator<[string, T]> {
  const seen = new Set<string>()
  for (const [name, overrides] of Object.entries(opts.transport_opts ?? {})) {
    seen.add(name)
    yield [name, { ...opts, ...(overrides ?? {}), transport: name }]
  }
  if (!seen.has(opts.transport)) yield [opts.transport, opts]
}
