import { describe, expect, it } from 'vitest'
import { BrineError, checkValueShape, ClosedError, errorFromJSON, FrameLimitError, RemoteError, serializeError, TimeoutError, TransportError } from '@brine/transport'

describe('errors', () => {
  it('carry literal names, context and a readable message', () => {
    const error = new TimeoutError('tcp://127.0.0.1:4506', 5000, 3)
    expect(error.name).toBe('TimeoutError')
    expect(error.message).toBe('request to tcp://127.0.0.1:4506 timed out after 5000 ms (3 tries)')
    expect(error).toBeInstanceOf(TransportError)
    expect(error.toJSON()).toEqual({
      name: 'TimeoutError',
      message: error.message,
      context: { address: 'tcp://127.0.0.1:4506', timeout: 5000, tries: 3 },
    })
  })

  it('are recognised across module copies by their marker', () => {
    expect(BrineError.isInstance(new ClosedError('request client'))).toBe(true)
    expect(BrineError.isInstance(new Error('plain'))).toBe(false)
    expect(BrineError.isInstance({ name: 'BrineError' })).toBe(false)
  })

  it('cross the wire as JSON and come back as RemoteError', () => {
    const json = serializeError(new TypeError('fun must be a string'))
    const back = errorFromJSON(json, 'tcp://127.0.0.1:4506')
    expect(back).toBeInstanceOf(RemoteError)
    expect((back as RemoteError).remoteName).toBe('TypeError')
    expect(back.message).toBe('tcp://127.0.0.1:4506 answered with TypeError: fun must be a string')
    expect(serializeError('thrown string')).toEqual({ name: 'Error', message: 'thrown string' })
  })

  it('a FrameLimitError comes back as itself, naming the bound', () => {
    const json = new FrameLimitError('max_frame_depth', 'nests containers more than 64 deep', 64, 9000, '127.0.0.1:5000').toJSON()
    const back = errorFromJSON(json, 'tcp://127.0.0.1:4506')
    expect(back).toBeInstanceOf(FrameLimitError)
    expect(back).toMatchObject({ key: 'max_frame_depth', limit: 64, size: 9000 })
    expect(back.message).toBe(`tcp://127.0.0.1:4506 refused the request: ${json.message}`)
  })

  it('checkValueShape refuses a value over the depth or entry bound without recursing', () => {
    let deep: unknown = 1
    for (let level = 0; level < 100_000; level++) deep = [deep]
    expect(() => checkValueShape(deep, { maxEntries: 1000, maxDepth: 64 }, 'the body')).toThrow('the body nests containers more than 64 deep, over max_frame_depth (64)')
    expect(() => checkValueShape({ a: Array.from({ length: 1001 }, () => 0) }, { maxEntries: 1000, maxDepth: 64 })).toThrow(/over max_frame_entries \(1000\)/)
    expect(() => checkValueShape({ a: [[1, 2], { b: 'x' }] }, { maxEntries: 1000, maxDepth: 3 })).not.toThrow()
  })
})
