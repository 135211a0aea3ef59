import { describe, expect, it } from 'vitest'
import { PayloadError } from '../src/errors.js'
import {
  tags,
  parseJobTag,
  parseJobReturnTag,
  isMinionOwnTag,
  clearRequest,
  validateEventLoad,
  validateJobLoad,
  validateMinionEventLoad,
  validatePublishLoad,
  validateReturnLoad,
  validateSyndicEventLoad,
  validateSyndicReturnLoad,
  parseSyndicTag,
  jobEventJid,
  parseSyndicAnnouncement,
  SEALED_COMMANDS,
} from '../src/index.js'

const publish = {
  cmd: 'publish',
  tgt: 'web*',
  tgt_type: 'glob',
  fun: 'test.ping',
  arg: [],
  kwarg: {},
  jid: '20240101000000000000',
  ret: '',
  user: 'root',
  key: 'k',
}
const ret = { cmd: '_return', id: 'web1', jid: '20240101000000000000', fun: 'test.ping', fun_args: [], return: true, retcode: 0, success: true }

describe('load validators', () => {
  it('accept well-formed loads and return them typed', () => {
    expect(validatePublishLoad(publish).fun).toBe('test.ping')
    expect(validatePublishLoad({ ...publish, tgt: ['a', 'b'], tgt_type: 'list', timeout: 5, minions: ['a'] }).tgt).toEqual(['a', 'b'])
    expect(validateReturnLoad({ ...ret, return: null, out: 'nested' }).return).toBeNull()
    expect(validateEventLoad({ tag: 'salt/job/1/new', data: {} }).tag).toBe('salt/job/1/new')
    const { cmd: _cmd, key: _key, ...job } = publish
    const stamp = { issued: 1_800_000_000_000, expire: 1_800_000_060_000 }
    expect(validateJobLoad({ ...job, ...stamp, kwarg: undefined }).jid).toBe(publish.jid)
    // A job load without its freshness stamp is refused: a recording of it could be replayed forever.
    expect(() => validateJobLoad({ ...job, kwarg: undefined })).toThrow("job load: field 'issued' must be a number (missing)")
    expect(() => validateJobLoad({ ...job, issued: stamp.issued, expire: 'never' })).toThrow('job load: field \'expire\' must be a number (got "never")')
    expect(validatePublishLoad({ ...publish, jid: undefined }).jid).toBeUndefined()
  })

  it('check minion event loads', () => {
    expect(() => validateMinionEventLoad({ cmd: '_minion_event', id: 'web1', events: [{ tag: '', data: {} }] })).toThrow(
      "event load: field 'tag' must be a non-empty string",
    )
  })

  it.each([
    [
      { ...publish, tgt_type: 'regex' },
      'publish load: field \'tgt_type\' must be one of glob, pcre, list, grain, grain_pcre, ipcidr, compound, nodegroup (got "regex")',
    ],
    [{ ...publish, jid: '123' }, 'publish load: field \'jid\' must be a jid (YYYYMMDDhhmmssffffff) (got "123")'],
    [{ ...publish, arg: 'x' }, 'publish load: field \'arg\' must be a list (got "x")'],
    [{ ...publish, fun: undefined }, "publish load: field 'fun' must be a non-empty string (missing)"],
    [{ ...publish, cmd: '_return' }, "publish load: field 'cmd' must be 'publish' (got \"_return\")"],
    [[publish], "publish load: field '(load)' must be a mapping"],
  ])('publish: %j', (load, message) => {
    expect(() => validatePublishLoad(load)).toThrow(PayloadError)
    expect(() => validatePublishLoad(load)).toThrow(message)
  })

  it.each([
    [{ ...ret, retcode: 'ok' }, '_return load: field \'retcode\' must be an integer (got "ok")'],
    [{ ...ret, success: 1 }, "_return load: field 'success' must be true or false (got 1)"],
    [{ ...ret, id: '' }, '_return load: field \'id\' must be a non-empty string (got "")'],
    [{ ...ret, return: undefined }, "_return load: field 'return' is required"],
  ])('return: %j', (load, message) => {
    expect(() => validateReturnLoad(load)).toThrow(message)
  })

  it('builds Salt job tags', () => {
    expect(tags.jobNew('20240101000000000000')).toBe('salt/job/20240101000000000000/new')
    expect(tags.jobReturn('20240101000000000000', 'web1')).toBe('salt/job/20240101000000000000/ret/web1')
  })

  it('parses job tags back into their parts, and nothing else', () => {
    expect(parseJobTag('salt/job/20240101000000000000/new')).toEqual({ kind: 'new', jid: '20240101000000000000' })
    expect(parseJobTag('salt/job/20240101000000000000/ret/web/1')).toEqual({ kind: 'ret', jid: '20240101000000000000', id: 'web/1' })
    expect(parseJobReturnTag(tags.jobReturn('20240101000000000000', 'db1'))).toEqual({ jid: '20240101000000000000', id: 'db1' })
    expect(parseJobReturnTag('salt/job/20240101000000000000/new')).toBeUndefined()
    expect(parseJobTag('salt/run/20240101000000000000/new')).toBeUndefined()
    expect(parseJobTag('salt/job/x/other')).toBeUndefined()
  })

  it("tells a minion's own tags from foreign ones", () => {
    expect(isMinionOwnTag('web1', 'minion_start')).toBe(true)
    expect(isMinionOwnTag('web1', tags.minionStart('web1'))).toBe(true)
    expect(isMinionOwnTag('web1', tags.minionStart('web10'))).toBe(false)
    expect(isMinionOwnTag('web1', 'salt/job/1/ret/web1')).toBe(false)
  })

  it('wraps a clear load in the one envelope', () => {
    expect(clearRequest({ cmd: 'publish' })).toEqual({ enc: 'clear', load: { cmd: 'publish' } })
  })
})

describe('syndic loads and tags', () => {
  const jid = '20260101000000000001'
  const entry = { jid, fun: 'test.ping', minions: ['web1'], pending: [], returns: { web1: { return: true, retcode: 0, success: true, fun_args: [] } } }

  it('validates a _syndic_return batch and names the first bad field', () => {
    const load = { cmd: '_syndic_return', id: 'syndic1', jobs: [entry, { jid, minions: [], pending: ['low'] }] }
    expect(validateSyndicReturnLoad(load)).toBe(load)
    const bad = (jobs: unknown[]): string => {
      try {
        validateSyndicReturnLoad({ cmd: '_syndic_return', id: 'syndic1', jobs })
      } catch (error) {
        expect(error).toBeInstanceOf(PayloadError)
        return (error as PayloadError).message
      }
      return 'accepted'
    }
    expect(bad([{ ...entry, jid: 'soon' }])).toContain('jobs[0].jid')
    expect(bad([{ ...entry, minions: 'web1' }])).toContain('jobs[0].minions')
    expect(bad([{ ...entry, returns: { web1: { return: true, retcode: 'zero', success: true, fun_args: [] } } }])).toContain('jobs[0].returns["web1"].retcode')
    expect(bad([{ ...entry, returns: { web1: { retcode: 0, success: true, fun_args: [] } } }])).toContain('jobs[0].returns["web1"].return')
    expect(() => validateSyndicReturnLoad({ cmd: '_syndic_return', id: 'syndic1' })).toThrow(/jobs/)
  })

  it('validates a _syndic_event load', () => {
    const load = { cmd: '_syndic_event', id: 'syndic1', events: [{ tag: 'salt/auth', data: { id: 'web1' } }] }
    expect(validateSyndicEventLoad(load)).toBe(load)
    expect(() => validateSyndicEventLoad({ ...load, events: [{ tag: '', data: {} }] })).toThrow(PayloadError)
  })

  it("builds Salt's syndic tags and parses a syndic's announcement, nothing else", () => {
    expect(tags.syndicStart('syndic1')).toBe('salt/syndic/syndic1/start')
    expect(tags.syndicEvent('syndic1', 'salt/auth')).toBe('syndic/syndic1/salt/auth')
    expect(tags.syndicJobNew('syndic1', jid)).toBe(`syndic/syndic1/salt/job/${jid}/new`)
    expect(parseSyndicTag(`syndic/syndic1/salt/job/${jid}/new`)).toEqual({ syndic: 'syndic1', tag: `salt/job/${jid}/new` })
    expect(parseSyndicTag('syndic//x')).toBeUndefined()
    expect(parseSyndicTag('salt/syndic/syndic1/start')).toBeUndefined()
    expect(parseSyndicAnnouncement({ tag: tags.syndicJobNew('syndic1', jid), data: { minions: ['web1', 7], syndic_pending: ['low'] } })).toEqual({
      syndic: 'syndic1',
      jid,
      minions: ['web1'],
      pending: ['low'],
    })
    expect(parseSyndicAnnouncement({ tag: `syndic/syndic1/salt/job/${jid}/ret/web1`, data: {} })).toBeUndefined()
    // The jid a job event is about, for a reader's filter: the job's own events and a syndic's announcements.
    expect(jobEventJid(tags.jobReturn(jid, 'web1'))).toBe(jid)
    expect(jobEventJid(tags.jobNew(jid))).toBe(jid)
    expect(jobEventJid(tags.syndicJobNew('syndic1', jid))).toBe(jid)
    expect(jobEventJid(`salt/job/${jid}`)).toBeUndefined()
    expect(jobEventJid('salt/job//new')).toBeUndefined()
    expect(jobEventJid('syndic/syndic1/salt/auth')).toBeUndefined()
    expect(jobEventJid('salt/auth')).toBeUndefined()
    expect(parseSyndicAnnouncement({ tag: `salt/job/${jid}/new`, data: { minions: [] } })).toBeUndefined()
    expect(SEALED_COMMANDS).toEqual(expect.arrayContaining(['_syndic_return', '_syndic_event']))
  })
})
