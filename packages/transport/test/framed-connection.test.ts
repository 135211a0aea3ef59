import { createServer, connect, type Server, type Socket } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { FramedConnection, QUEUED_MESSAGE_COST } from '../src/index.js'
import { decode, encode, frame } from '@brine/core'

/** A loopback socket pair: the writer's end (wrapped by the test) and a FramedConnection that collects frames. */
async function socketPair(): Promise<{ writer: Socket; received: unknown[]; server: Server; reader: FramedConnection }> {
  const received: unknown[] = []
  let reader: FramedConnection | undefined
  const server = createServer((socket) => {
    reader = new FramedConnection(
      socket,
      { maxFrameBytes: 1 << 20, hwm: 100 },
      {
        onFrame: (body) => received.push(decode(body)),
        onOversize: () => {},
        onClose: () => {},
      },
    )
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  const writer = connect(port, '127.0.0.1')
  await new Promise<void>((resolve) => writer.once('connect', resolve))
  await until(() => reader !== undefined, 'the server accepting the connection')
  return { writer, received, server, reader: reader! }
}

/** Polls `condition` every 5 ms for at most 5 s; throws naming `what` when it never holds. */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (let tries = 0; !condition(); tries++) {
    if (tries >= 1000) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

describe('FramedConnection', () => {
  const cleanup: Array<() => Promise<void>> = []
  afterEach(async () => {
    for (const step of cleanup.splice(0)) await step()
  })

  /** A coalescing writer of `hwm` over a fresh socket pair, closed after the test, and what its peer received. */
  async function coalescingWriter(
    hwm: number,
    options: { maxQueuedBytes?: number; coalesce?: boolean; stalled?: boolean } = {},
  ): Promise<{ connection: FramedConnection; received: unknown[] }> {
    const { writer, received, server, reader } = await socketPair()
    // A stalled peer reads nothing: what the kernel's buffers took stays there.
    if (options.stalled === true) reader.socket.pause()
    const connection = new FramedConnection(
      writer,
      {
        maxFrameBytes: 1 << 20,
        hwm,
        coalesce: options.coalesce ?? true,
        ...(options.maxQueuedBytes === undefined ? {} : { maxQueuedBytes: options.maxQueuedBytes }),
      },
      { onFrame: () => {}, onOversize: () => {}, onClose: () => {} },
    )
    cleanup.push(async () => {
      await connection.close()
      await reader.close()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    })
    return { connection, received }
  }

  it('coalesce: frames written in one turn all arrive, whole and in order', async () => {
    const { connection, received } = await coalescingWriter(1000)
    for (let index = 0; index < 500; index++) expect(connection.write(frame(encode({ index })))).toBe(true)
    // A second turn's frames follow the first turn's.
    await new Promise((resolve) => setImmediate(resolve))
    for (let index = 500; index < 600; index++) connection.write(frame(encode({ index })))
    await until(() => received.length >= 600, '600 frames')
    expect(received).toEqual(Array.from({ length: 600 }, (_, index) => ({ index })))
  })

  it("coalesce: a batch begun in an immediate (where the job cache's batch lets a publish go) goes to the socket at once, before the next immediate", async () => {
    const { connection, received } = await coalescingWriter(1000)
    const unsentAtNextImmediate = await new Promise<number>((resolve) => {
      setImmediate(() => {
        // Queued before the writes: a batch held for the rest of the loop's turn would still be unsent when it runs.
        setImmediate(() => resolve(connection.queuedBytes))
        void (async () => {
          for (let index = 0; index < 3; index++) {
            await null
            connection.write(frame(encode({ index })))
          }
        })()
      })
    })
    expect(unsentAtNextImmediate).toBe(0)
    await until(() => received.length >= 3, '3 frames')
    expect(received).toEqual([{ index: 0 }, { index: 1 }, { index: 2 }])
  })

  it('coalesce: refuses frames past the hwm within one turn, and accepts again the next', async () => {
    const { connection, received } = await coalescingWriter(10)
    const accepted = Array.from({ length: 15 }, (_, index) => connection.write(frame(encode({ index }))))
    expect(accepted).toEqual([...Array(10).fill(true), ...Array(5).fill(false)])
    await new Promise((resolve) => setImmediate(resolve))
    expect(connection.write(frame(encode({ index: 'next' })))).toBe(true)
    await until(() => received.length >= 11, '11 frames')
    expect(received).toEqual([...Array.from({ length: 10 }, (_, index) => ({ index })), { index: 'next' }])
  })

  it('a queue of small frames behind a stalled peer holds its byte bound counting what each frame costs, not only its bytes', async () => {
    const bound = 256 * 1024
    const { connection } = await coalescingWriter(1_000_000, { maxQueuedBytes: bound, coalesce: false, stalled: true })
    const small = frame(encode({ tag: 'salt/job/x/ret/m', n: 1 }))
    // Written until the socket stops draining and the queue refuses: bounded, since the peer reads nothing.
    let refused = false
    for (let written = 0; written < 2_000_000 && !refused; written++) refused = !connection.write(small)
    expect(refused).toBe(true)
    expect(connection.queued).toBeGreaterThan(0)
    // Counted by bytes alone, bound / small.length frames would have queued: several times this.
    expect(connection.queued * (small.length + QUEUED_MESSAGE_COST)).toBeLessThanOrEqual(bound + small.length + QUEUED_MESSAGE_COST)
    expect(connection.queuedBytes).toBe(connection.queued * (small.length + QUEUED_MESSAGE_COST))
  })

  it("holdReading takes nothing more from the socket while held (not even a readable buffer's worth of it), and every frame arrives once resumed", async () => {
    const { writer, received, server, reader } = await socketPair()
    cleanup.push(async () => {
      writer.destroy()
      await reader.close()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    })
    const frames = Array.from({ length: 4000 }, (_, index) => frame(encode({ index, pad: 'p'.repeat(1000) })))
    const total = frames.reduce((sum, each) => sum + each.length, 0)
    reader.holdReading(true)
    const before = reader.bytesReceived
    for (const each of frames) writer.write(each)
    // The kernel took some of it: from here every turn of the loop would read it, were the socket reading.
    await until(() => writer.writableLength < total, 'the kernel taking the first bytes')
    for (let turn = 0; turn < 50; turn++) await new Promise((resolve) => setImmediate(resolve))
    expect(reader.socket.readableLength).toBe(0)
    expect(reader.bytesReceived).toBe(before)
    expect(received).toEqual([])
    reader.holdReading(false, 0)
    await until(() => received.length >= frames.length, `${frames.length} frames after the hold`)
    expect(received.map((body) => (body as { index: number }).index)).toEqual(frames.map((_, index) => index))
    // Held and resumed again mid-stream: still nothing lost.
    reader.holdReading(true)
    writer.write(Buffer.concat(frames.slice(0, 10)))
    reader.holdReading(false, 0)
    await until(() => received.length >= frames.length + 10, 'the 10 frames after a second hold')
  })

  it('coalesce: what the socket took from a batch and has not sent counts against the byte bound of the next turns', async () => {
    const bound = 8 * 1024 * 1024
    const { connection } = await coalescingWriter(1_000_000, { maxQueuedBytes: bound, stalled: true })
    const chunk = frame(encode({ big: 'x'.repeat(64 * 1024) }))
    // One turn's batch up to the bound, handed to the socket together after the turn.
    let accepted = 0
    while (connection.write(chunk)) accepted++
    expect(accepted).toBeGreaterThan(100)
    await new Promise((resolve) => setImmediate(resolve))
    await new Promise((resolve) => setImmediate(resolve))
    const unsent = connection.socket.writableLength
    let more = 0
    for (let tries = 0; tries < 1000 && connection.write(chunk); tries++) more++
    // The batch's unsent bytes plus what queued after it stay within the bound (and the one frame an empty queue takes).
    expect(unsent + connection.queuedBytes).toBeLessThanOrEqual(bound + chunk.length + QUEUED_MESSAGE_COST)
    expect(more).toBeLessThan(accepted)
  })
})
