import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { MAX_TAG_LENGTH, tagProblem } from '@brine/common'
import { rootCaller } from '../src/index.js'
import { clearClient, FakeMinion, runCleanups, startMaster, tempDir, watchSubscribers } from './helpers.js'

afterEach(runCleanups)

const TRANSPORTS = ['zeromq', 'tcp'] as const
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
})

describe.each(TRANSPORTS)('tags a peer sends over %s', (transport) => {
  it('a minion event or a syndic event whose tag holds a newline or a tab, or is over-long, gets a typed error reply and never reaches the bus', async () => {
    const dir = await tempDir()
    const { master, events } = await startMaster(dir, { transport, auto_accept: true })
    const address = { host: '127.0.0.1', publishPort: master.opts.publish_port, retPort: master.opts.ret_port }
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
    const fired = await client.send({ enc: 'clear', load: { cmd: 'fire_event', tag: 'salt/netapi/hook/a\nb', data: {}, key: master.rootKey } }).catch((error: unknown) => error)
    expect(fired).toMatchObject({ remoteName: 'MalformedRequestError', message: expect.stringContaining('U+000A') })

    // A printable event from the same minion goes through, and nothing before it was written.
    expect(await web1!.sealed({ cmd: '_minion_event', id: 'web1', events: [{ tag: 'salt/minion/web1/fine', data: {} }] })).toEqual({ ok: true })
    await events.next('salt/minion/web1/fine')
    expect(events.events.filter((event) => tagProblem(event.tag) !== undefined || event.tag.includes('FORGED'))).toEqual([])
    expect(events.events.filter((event) => event.tag.startsWith('syndic/syndic1/custom'))).toEqual([])
  })
})
