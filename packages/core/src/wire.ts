/** What crosses the wire: any msgpack value, and the bounds on one received message every endpoint starts from. */
/**
 * Any value msgpack can carry: null, booleans, numbers, strings, Uint8Array, arrays and plain
 * objects of these. Every message on the wire is exactly one such value.
 */
export type WireValue = unknown
export const DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
/** A server's bound on entries in one received message (`max_frame_entries`): decoding 262,144 empty maps takes about 0.1 s. */
export const DEFAULT_MAX_FRAME_ENTRIES = 262_144
/** A server's bound on nesting in one received message (`max_frame_depth`). */
export const DEFAULT_MAX_FRAME_DEPTH = 64
/** A client's bounds: it decodes what the master it chose sends (runner output can be large), still bounded. */
export const DEFAULT_CLIENT_MAX_FRAME_ENTRIES = 4_194_304
export const DEFAULT_CLIENT_MAX_FRAME_DEPTH = 256
