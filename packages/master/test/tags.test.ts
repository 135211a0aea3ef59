import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { MAX_TAG_LENGTH, tagProblem } from '@brine/protocol'
import { callerTagProblem, minionTagProblem, rootCaller } from '../src/index.js'
import { addressOf, clearClient, FakeMinion, runCleanups, startMaster, stopNatsServer, tempDir, watchSubscribers } from './helpers.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const
const FORGED = 'salt/minion/web1/a\nb\tc'
const LONG = `salt/minion/web1/${'x'.repeat(MAX_TAG_LENGTH)}`

describe('tagProblem', () => {
  it('takes printable tags up to the bound; refuses control characters, separators, empty and over-long ones, naming why', () => {
    expect(tagProblem('salt/netapi/hook/ci/build ok/é')).toBeUndefined()
    expect(tagProblem('x'.repeat(MAX_TAG_LENGTH))).toBeUndefined()
    expect(tagProblem(FORGED)).toBe('holds the control character U+000A at 18 (tags are printable text)')
    expect(tagProblem('a\u0085b')).toMatch(/U\+0085/)
    expect(tagProblem('a\u2028b')).toMatch(/U\+2028/)
    expect(tagProblem('a\u007fb')).toMatch(/U\+007F/)
    expect(tagProblem(LONG)).toBe(`is ${LONG.length} characters long, over ${MAX_TAG_LENGTH}`)
    expect(tagProblem('')).toBe('must be a non-empty string')
    expect(tagProblem(7)).toBe('must be a non-empty string')
  })

  it("is the first rule of what a master's caller may fire; job and minion tags are the master's own on top of it", () => {
    expect(callerTagProblem('salt/netapi/hook/deploy')).toBeUndefined()
    expect(callerTagProblem('custom/a\nb')).toBe(`tag ${tagProblem('custom/a\nb')}`)
    expect(callerTagProblem(LONG)).toBe(`tag ${tagProblem(LONG)}`)
    expect(callerTagProblem(7)).toBe('tag must be a non-empty string')
    for (const reserved of ['salt/job/20260101000000000001/ret/web1', 'salt/minion/web1/start', 'minion_start']) {
      expect(callerTagProblem(reserved)).toMatch(/is reserved for the master and its minions$/)
    }
    expect(minionTagProblem('web1', 'salt/minion/web1/deploy')).toBeUndefined()
    expect(minionTagProblem('web1', 'minion_start')).toBeUndefined()
    expect(minionTagProblem('web1', 'salt/minion/web2/deploy')).toMatch(/may only fire minion_start or tags under salt\/minion\/web1\//)
  })
})

describe.each(TRANSPORTS)('tags a peer sends over %s', (transport) => {
  it('a minion event or a syndic event whose tag holds a newline or a tab, or is over-long, gets a typed error reply and never reaches the bus', async () => {
    const dir = await tempDir()
    const { master, events } = await startMaster(dir, { transport, auto_accept: true })
    const address = addressOf(master)
    const subscribers = watchSubscribers(master.endpoints[0]!.publish)
    const [web1, syndic] = await Promise.all(['web1', 'syndic1'].map((id) => FakeMinion.start(transport, id, address, join(dir, `m-${id}`))))
    await subscribers(2)
    for (const peer of [web1!, syndic!]) expect(await peer.auth()).toEqual({ ok: true })
    // Only a key accepted as a syndic's may send _syndic_event: this one is, so its tags are what is refused.
    expect((await master.service.wheel(rootCaller(), { fun: 'key.accept_syndic', match: 'syndic1' })).return).toEqual({ syndics: ['syndic1'] })

    for (const tag of [FORGED, LONG]) {
      const reply = await web1!.sealed({ cmd: '_minion_event', id: 'web1', events: [{ tag, data: { return: 'FORGED' } }] })
      expect(reply).toMatchObject({ ok: false, error: { name: 'PayloadError', context: { load: 'event', field: 'tag' } } })
      expect((reply['error'] as { message: string }).message.length).toBeLessThan(600)
    }
    const syndicReply = await syndic!.sealed({ cmd: '_syndic_event', id: 'syndic1', events: [{ tag: 'custom/a\r\nb', data: {} }] })
    expect(syndicReply).toMatchObject({ ok: false, error: { name: 'PayloadError', message: expect.stringContaining('U+000D') } })
    // The clear fire_event (root key: the REST API's webhooks) is held to the same rule.
    const client = await clearClient(transport, address)
    const fired = await client
      .send({ enc: 'clear', load: { cmd: 'fire_event', tag: 'salt/netapi/hook/a\nb', data: {}, key: master.rootKey } })
      .catch((error: unknown) => error)
    expect(fired).toMatchObject({ remoteName: 'MalformedRequestError', message: expect.stringContaining('U+000A') })

    // The event.send runner (what reactions and the master's schedule fire with) composes the same rule with the
    // master's own: a tag that is no tag is malformed, a well-formed job or minion tag is refused as reserved.
    const runner = async (tag: string): Promise<Record<string, unknown>> =>
      (await client.send({ enc: 'clear', load: { cmd: 'runner', fun: 'event.send', arg: [tag, {}], key: master.rootKey } })) as Record<string, unknown>
    expect(await runner('custom/a\nb')).toMatchObject({
      success: false,
      return: expect.stringMatching(/^Exception occurred in runner event\.send: MalformedRequestError: .*U\+000A/),
    })
    expect(await runner(LONG)).toMatchObject({ success: false, return: expect.stringMatching(/MalformedRequestError: .*over 1024/) })
    expect(await runner('salt/minion/web1/start')).toMatchObject({
      success: false,
      return: expect.stringMatching(/PermissionDeniedError: .*reserved for the master and its minions/),
    })
    expect(await runner('custom/fine')).toMatchObject({ success: true, return: true })
    await events.next('custom/fine')

    // A printable event from the same minion goes through, and nothing before it was written.
    expect(await web1!.sealed({ cmd: '_minion_event', id: 'web1', events: [{ tag: 'salt/minion/web1/fine', data: {} }] })).toEqual({ ok: true })
    await events.next('salt/minion/web1/fine')
    expect(events.events.filter((event) => tagProblem(event.tag) !== undefined || event.tag.includes('FORGED'))).toEqual([])
    expect(events.events.filter((event) => event.tag.startsWith('syndic/syndic1/custom'))).toEqual([])
  })
})
