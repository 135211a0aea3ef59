import type { IncomingMessage } from 'node:http'

/** How much of an unread body the API reads before it answers: {@link drainUnreadBody}. */
export interface DrainBounds {
  /** Bytes of the rest of the body read at most (a declared `Content-Length` above it is not read at all). */
  bytes: number
  /** Time the rest may take to arrive, ms. */
  ms: number
}

/** The drain's bounds for an API whose largest accepted body is `maxRequestBodySize` bytes. */
export function drainBounds(maxRequestBodySize: number): DrainBounds {
  // A body somewhat over the limit (a client that misjudged it) is read and answered; one declared far above it is
  // not worth the bandwidth, and its sender is cut off.
  return { bytes: Math.max(16 * 1024 * 1024, 2 * maxRequestBodySize), ms: 10_000 }
}

/**
 * Reads and discards the rest of a request body the API refuses before reading it (over `max_request_body_size`, a
 * content type it does not parse, a caller outside `authorized_ips`), within `bounds`. Resolves true when the body
 * ended within them, false when it did not (the caller then answers with `Connection: close`).
 *
 * Why read what is refused: fastify closes the connection after a body it stopped reading, and a socket closed with
 * bytes unread makes the kernel reset the connection (RFC 9112 §9.6). A client still sending its body then gets a
 * broken pipe instead of the answer (a client that sends the whole body before it reads, as Python's http.client
 * does, never sees the answer), and the reset may erase the answer from its buffers before it reads it. Once the
 * body is in, the close is a clean one and the client reads the 413. The bounds keep a sender from making the API
 * read without end (on a kept connection, Node's server would otherwise read all of a refused body, however long).
 */
export function drainUnreadBody(request: IncomingMessage, bounds: DrainBounds): Promise<boolean> {
  const declared = Number(request.headers['content-length'])
  // No body to read: none declared (neither a length nor chunks), or all of it in already.
  const bodiless = request.headers['content-length'] === undefined && request.headers['transfer-encoding'] === undefined
  if (bodiless || request.complete) return Promise.resolve(true)
  if (declared > bounds.bytes) return Promise.resolve(false)
  return new Promise((resolve) => {
    let read = 0
    const finish = (ended: boolean): void => {
      clearTimeout(timer)
      request.off('data', count)
      request.off('end', onEnd)
      request.off('close', onClose)
      resolve(ended)
    }
    const count = (chunk: Buffer): void => {
      read += chunk.length
      if (read > bounds.bytes) finish(false)
    }
    const onEnd = (): void => finish(true)
    const onClose = (): void => finish(request.complete)
    const timer = setTimeout(() => finish(false), bounds.ms)
    request.on('data', count)
    request.once('end', onEnd)
    request.once('close', onClose)
    request.resume()
  })
}
