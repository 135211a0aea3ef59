import { describe, expect, it } from 'vitest'
import {
  BrineError,
  checkValueShape,
  ClosedError,
  errorFromJSON,
  errorFromWire,
  FrameLimitError,
  registerErrors,
  registeredError,
  RemoteError,
  remoteCause,
  serializeError,
  TimeoutError,
  TransportError,
  type SerializedError,
} from '@brine/core'

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
    expect(() => checkValueShape(deep, { maxEntries: 1000, maxDepth: 64 }, 'the body')).toThrow(
      'the body nests containers more than 64 deep, over max_frame_depth (64)',
    )
    expect(() => checkValueShape({ a: Array.from({ length: 1001 }, () => 0) }, { maxEntries: 1000, maxDepth: 64 })).toThrow(/over max_frame_entries \(1000\)/)
    expect(() => checkValueShape({ a: [[1, 2], { b: 'x' }] }, { maxEntries: 1000, maxDepth: 3 })).not.toThrow()
  })
})

class WireTestError extends BrineError {
  override name = 'WireTestError'
  readonly jid: string
  constructor(jid: string) {
    super(`job ${jid} went wrong`, { jid, limit: 3 })
    this.jid = jid
  }
}
registerErrors({ WireTestError })

describe('the error registry', () => {
  it('rebuilds a registered error as its own class, with its message, context and typed fields', () => {
    const back = errorFromWire(new WireTestError('20260101000000000000').toJSON())
    expect(back).toBeInstanceOf(WireTestError)
    expect(back).toBeInstanceOf(BrineError)
    expect(BrineError.isInstance(back)).toBe(true)
    expect(back).toMatchObject({
      name: 'WireTestError',
      message: 'job 20260101000000000000 went wrong',
      jid: '20260101000000000000',
      context: { jid: '20260101000000000000', limit: 3 },
    })
    expect(back.toJSON()).toEqual(new WireTestError('20260101000000000000').toJSON())
    const timeout = errorFromWire(new TimeoutError('tcp://10.0.0.1:4506', 5000, 2).toJSON())
    expect(timeout).toBeInstanceOf(TimeoutError)
    expect(timeout).toMatchObject({ address: 'tcp://10.0.0.1:4506', timeout: 5000, tries: 2 })
  })

  it('keeps the name of an unregistered error on a plain BrineError, and never lets context replace a member', () => {
    const back = errorFromWire({ name: 'TypeError', message: 'fun must be a string' })
    expect(back.constructor).toBe(BrineError)
    expect(back).toMatchObject({ name: 'TypeError', message: 'fun must be a string' })
    const hostile = errorFromWire(
      JSON.parse('{"name":"WireTestError","message":"m","context":{"__proto__":{"x":1},"toJSON":"no","jid":"1"}}') as SerializedError,
    )
    expect(hostile).toBeInstanceOf(WireTestError)
    expect(typeof hostile.toJSON).toBe('function')
    expect((hostile as unknown as Record<string, unknown>)['x']).toBeUndefined()
    expect(errorFromWire({ name: 42, message: 7 } as unknown as SerializedError)).toMatchObject({ name: 'Error', message: '7' })
  })

  it("gives a RemoteError the far side's typed error, which remoteCause finds along the cause chain", () => {
    const remote = new RemoteError(new WireTestError('1').toJSON(), 'tcp://127.0.0.1:4506')
    expect(remote.remote).toBeInstanceOf(WireTestError)
    expect(remote.cause).toBe(remote.remote)
    const wrapped = new BrineError('the master refused publish', {}, { cause: remote })
    expect(remoteCause(wrapped)).toBe(remote.remote)
    expect(remoteCause(new TimeoutError('tcp://127.0.0.1:4506', 1, 1))).toBeUndefined()
    expect(remoteCause('a string')).toBeUndefined()
  })

  it('keeps the first class registered under a name', () => {
    class Impostor extends BrineError {
      override name = 'WireTestError'
    }
    registerErrors({ WireTestError: Impostor })
    expect(registeredError('WireTestError')).toBe(WireTestError)
    expect(registeredError('TimeoutError')).toBe(TimeoutError)
  })
})
