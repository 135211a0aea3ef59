import { describe, expect, it } from 'vitest'
import { BrineError, ClosedError, errorFromJSON, RemoteError, serializeError, TimeoutError, TransportError } from '@brine/transport'

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
    expect(back.remoteName).toBe('TypeError')
    expect(back.message).toBe('tcp://127.0.0.1:4506 answered with TypeError: fun must be a string')
    expect(serializeError('thrown string')).toEqual({ name: 'Error', message: 'thrown string' })
  })
})
