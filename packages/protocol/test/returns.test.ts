import { describe, expect, it } from 'vitest'
import { parseListJob, parsePublishReply, returnEventData, returnOfEvent, syndicReturnOf, unwrapOutputter, type ReturnLoad } from '../src/index.js'

const JID = '20260101000000000001'
const load: ReturnLoad = { cmd: '_return', id: 'web1', jid: JID, fun: 'test.echo', fun_args: ['hi'], return: 'hi', retcode: 2, success: false, out: 'txt' }

describe('the return event and its two conversions', () => {
  it('return → event keeps exactly Salt’s keys, stamped; event → return gives back what the load said', () => {
    const event = returnEventData({ ...load, extra: 'dropped' } as ReturnLoad)
    expect(Object.keys(event).sort()).toEqual(['_stamp', 'cmd', 'fun', 'fun_args', 'id', 'jid', 'out', 'retcode', 'return', 'success'])
    expect(Number.isNaN(Date.parse(event._stamp ?? ''))).toBe(false)
    expect(returnOfEvent(event)).toEqual({ return: 'hi', retcode: 2, success: false, out: 'txt', fun_args: ['hi'] })
  })

  it('return → event keeps the metadata the job carried, as Salt’s return event does', () => {
    const event = returnEventData({ ...load, metadata: { ticket: 8 } })
    expect(event.metadata).toEqual({ ticket: 8 })
    expect('metadata' in returnEventData(load)).toBe(false)
  })

  it('event → return: retcode 0 and no success or out when the event lacks them', () => {
    const ret = returnOfEvent({ return: true, retcode: 'bad', success: 'yes', out: 3 })
    expect(ret).toEqual({ return: true, retcode: 0, fun_args: [] })
    expect('success' in ret).toBe(false)
  })

  it('the syndic’s entry reads an unstated success as not failed, and keeps a stated one', () => {
    expect(syndicReturnOf({ return: 1 }, ['a'])).toEqual({ return: 1, retcode: 0, success: true, fun_args: ['a'] })
    expect(syndicReturnOf(returnEventData(load))).toEqual({ return: 'hi', retcode: 2, success: false, fun_args: ['hi'], out: 'txt' })
  })
})

describe('parseListJob', () => {
  it('gives the function, the arguments and the entries that hold a return', () => {
    const listed = parseListJob({
      jid: JID,
      Function: 'test.echo',
      Arguments: ['hi'],
      Result: { web1: { return: 'hi', retcode: 0, success: true }, bad: 'x', empty: {} },
    })
    expect(listed).toEqual({ fun: 'test.echo', funArgs: ['hi'], returns: { web1: { return: 'hi', retcode: 0, success: true } } })
  })

  it('gives no returns for an unknown jid or another shape', () => {
    expect(parseListJob({ jid: JID })).toEqual({ funArgs: [], returns: {} })
    expect(parseListJob([1])).toEqual({ funArgs: [], returns: {} })
    expect(parseListJob({ Result: [1] })).toEqual({ funArgs: [], returns: {} })
  })
})

describe('parsePublishReply', () => {
  it('keeps jid, minions as strings, syndics and a non-empty missing', () => {
    expect(parsePublishReply({ jid: JID, minions: ['a', 2], syndics: { s1: ['b'], s2: 'x' }, missing: ['ghost'] })).toEqual({
      jid: JID,
      minions: ['a', '2'],
      syndics: { s1: ['b'], s2: [] },
      missing: ['ghost'],
    })
    expect(parsePublishReply({ jid: JID, minions: [], missing: [] })).toEqual({ jid: JID, minions: [] })
  })

  it('is undefined for anything that is not {jid, minions}', () => {
    for (const bad of [null, 'x', [], { jid: 1, minions: [] }, { jid: JID }, { jid: JID, minions: 'a' }]) expect(parsePublishReply(bad)).toBeUndefined()
  })
})

describe('unwrapOutputter', () => {
  it('splits a runner’s {outputter, data} answer, and leaves any other value as the data', () => {
    expect(unwrapOutputter({ outputter: 'txt', data: { web1: 'hi' } })).toEqual({ outputter: 'txt', data: { web1: 'hi' } })
    expect(unwrapOutputter({ outputter: 'txt', data: 'x', more: 1 })).toEqual({ data: { outputter: 'txt', data: 'x', more: 1 } })
    expect(unwrapOutputter({ outputter: 3, data: 'x' })).toEqual({ data: { outputter: 3, data: 'x' } })
    expect(unwrapOutputter([1])).toEqual({ data: [1] })
  })
})
