import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import bcrypt from 'bcryptjs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freeLoopbackPort, killAllProcesses } from '@brine/testkit'
import { Fleet } from '@brine/harness'
import { httpClient, SseReader, type HttpOptions, type HttpResponse } from './helpers/http.js'
import { bus, TRANSPORTS } from './helpers/fleets.js'

/**
 * Cost at the doors of brine-api, on every transport (issue 27, findings 2, 3 and 6): logins are rate-limited
 * per user and per client address (429 with Retry-After); a webhook path that cannot be a tag is refused with
 * 400 and never reaches the bus; a body over the entry or depth bound is answered 413/400, never 500.
 */

const WAIT_MS = 30_000
const PASSWORDS = { admin: 'admin-pw', alice: 'wonder' }

afterAll(() => killAllProcesses())

const json = (value: unknown): { body: string; headers: Record<string, string> } => ({
  body: JSON.stringify(value),
  headers: { 'content-type': 'application/json' },
})
/** `depth` arrays inside one another as JSON text (JSON.stringify itself would recurse that deep). */
const nested = (depth: number): string => `${'['.repeat(depth)}"bottom"${']'.repeat(depth)}`

describe.each(TRANSPORTS)('the doors of brine-api over %s', (transport) => {
  let fleet: Fleet
  let dir: string
  let api: ReturnType<typeof httpClient>
  let admin: string

  const login = (username: string, password: string, options: HttpOptions = {}): Promise<HttpResponse> =>
    api.call('/login', { method: 'POST', ...json({ username, password, eauth: 'file' }), ...options })
  const run = (lowstate: unknown): Promise<HttpResponse> => runText(JSON.stringify(lowstate))
  const runText = (body: string): Promise<HttpResponse> =>
    api.call('/', { method: 'POST', body, headers: { 'content-type': 'application/json', 'x-auth-token': admin } })
  const testArg = (argJson: string): string => `[{"client": "local", "tgt": "web1", "fun": "test.arg", "arg": [${argJson}]}]`

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'brine-doors-'))
    await writeFile(join(dir, 'htpasswd'), `admin:${bcrypt.hashSync(PASSWORDS.admin, 4)}\nalice:${bcrypt.hashSync(PASSWORDS.alice, 4)}\n`)
    const port = await freeLoopbackPort()
    fleet = await Fleet.start({
      bus,
      minions: [{ id: 'web1', transport }],
      masterConfig: {
        timeout: 5,
        external_auth: { file: { '^filename': join(dir, 'htpasswd'), '^filetype': 'htpasswd', admin: ['.*'], alice: ['test.*'] } },
        eauth_rate_limit_user: 3,
        eauth_rate_limit_address: 6,
        netapi_enable_clients: ['local'],
        rest_cherrypy: { port, host: '127.0.0.1', disable_ssl: true, max_request_body_size: 16 * 1024 * 1024 },
      },
    })
    const started = await fleet.startApi()
    api = httpClient(started.url)
    const response = await login('admin', PASSWORDS.admin)
    expect(response.status).toBe(200)
    admin = (response.json as { return: Array<{ token: string }> }).return[0]!.token
  })

  afterAll(async () => {
    await fleet?.stop()
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  it('wrong passwords from one address: 401 up to eauth_rate_limit_user, then 429 with Retry-After in salt-api JSON; another user, then another address, unaffected', async () => {
    for (let attempt = 0; attempt < 3; attempt++) expect((await login('alice', 'guess')).status).toBe(401)
    const limited = await login('alice', PASSWORDS.alice)
    expect(limited.status).toBe(429)
    expect(limited.json).toEqual({
      status: 429,
      return: expect.stringMatching(/^too many failed logins for user "alice" \(eauth_rate_limit_user: 3 per window\)/),
    })
    const retryAfter = Number(limited.headers['retry-after'])
    expect(retryAfter).toBeGreaterThan(0)
    expect(retryAfter).toBeLessThanOrEqual(60)
    // Another user from the same address still gets in.
    expect((await login('admin', PASSWORDS.admin)).status).toBe(200)
    // Unknown users fill the address's six failures; then nobody gets in from it, but from another address they do.
    for (const user of ['carol', 'dave', 'erin']) expect((await login(user, 'x')).status).toBe(401)
    const byAddress = await login('admin', PASSWORDS.admin)
    expect(byAddress.status).toBe(429)
    expect(byAddress.json).toEqual({
      status: 429,
      return: expect.stringMatching(/^too many failed logins for address 127\.0\.0\.1 \(eauth_rate_limit_address: 6 per window\)/),
    })
    expect(Number(byAddress.headers['retry-after'])).toBeGreaterThan(0)
    expect((await login('admin', PASSWORDS.admin, { localAddress: '127.0.0.2' })).status).toBe(200)
  })

  it('a hook path with a newline and a tab, or too long for a tag, is refused with 400 and never reaches the bus', async () => {
    const stream = new SseReader(await api.stream('/events', { 'x-auth-token': admin }))
    const hook = (path: string): Promise<HttpResponse> =>
      api.call(path, { method: 'POST', ...json({ return: 'FORGED' }), headers: { 'content-type': 'application/json', 'x-auth-token': admin } })
    const forged = await hook('/hook/a%0Ab%09c')
    expect(forged.status).toBe(400)
    expect(forged.json).toEqual({ status: 400, return: expect.stringContaining('holds the control character U+000A') })
    const long = await hook(`/hook/${'x'.repeat(1100)}`)
    expect(long.status).toBe(400)
    expect(long.json).toEqual({ status: 400, return: expect.stringMatching(/characters long, over 1024/) })
    expect((await hook('/hook/fine')).status).toBe(200)
    await stream.next((record) => record.tag === 'salt/netapi/hook/fine', WAIT_MS, 'the printable hook event')
    // The bus is ordered: nothing from the refused hooks came before the one that was accepted.
    expect(stream.records.filter((record) => record.tag?.startsWith('salt/netapi/hook') === true && record.tag !== 'salt/netapi/hook/fine')).toEqual([])
    expect(stream.records.filter((record) => record.data?.includes('FORGED') === true && !record.tag?.endsWith('/fine'))).toEqual([])
    stream.close()
  })

  it('a body over the depth or entry bound is answered 400 or 413 naming the bound, never 500; the master refuses what the API lets through with a FrameLimitError; jobs go on', async () => {
    const deep = await runText(testArg(nested(5000)))
    expect(deep.status).toBe(400)
    expect(deep.json).toEqual({ status: 400, return: 'the request body nests containers more than 64 deep, over max_frame_depth (64)' })
    const many = await runText(testArg(JSON.stringify(Array.from({ length: 1_000_000 }, (_, n) => n))))
    expect(many.status).toBe(413)
    expect(many.json).toEqual({ status: 413, return: 'the request body holds more than 262144 entries, over max_frame_entries (262144)' })
    // 61 levels inside the argument: within the bound as a body (64), over it on the wire (the envelope adds its own levels).
    const onTheWire = await runText(testArg(nested(61)))
    expect(onTheWire.status).toBe(400)
    expect(onTheWire.json).toEqual({
      status: 400,
      return: expect.stringMatching(/refused the request: frame of \d+ bytes from .* nests containers more than 64 deep, over max_frame_depth \(64\)/),
    })
    const ping = await run([{ client: 'local', tgt: 'web1', fun: 'test.ping' }])
    expect(ping.status).toBe(200)
    expect(ping.json).toEqual({ return: [{ web1: true }] })
  })
})
