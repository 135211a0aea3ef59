import { describe, expect, it } from 'vitest'
import { EauthError, PublishError } from '@brine/client'
import { defaultsFor, type MasterConfig } from '@brine/config'
import { errorFromJSON, FrameLimitError, RemoteError, type ErrorContext } from '@brine/core'
import { apiSettings } from '../src/config.js'
import { chooseResponseType, serialize } from '../src/negotiate.js'
import { createApiApp, parseForm } from '../src/server.js'
import { ApiMasterClient } from '../src/api-master-client.js'
import { EventStreams, sseRecord } from '../src/sse.js'

describe('request bodies and content negotiation', () => {
  it("reads a form as one chunk: a repeated key becomes a list, each arg typed as Salt's yamlify_arg", () => {
    expect(parseForm('client=local&tgt=web*&fun=test.arg&arg=1&arg=two&arg=%5B3%5D&arg=a%3Db')).toEqual({
      client: 'local',
      tgt: 'web*',
      fun: 'test.arg',
      arg: [1, 'two', [3], 'a=b'],
    })
    expect(parseForm('tgt=a&tgt=b')).toEqual({ tgt: ['a', 'b'] })
  })

  it('answers JSON unless YAML is preferred; nothing acceptable is undefined (406)', () => {
    expect(chooseResponseType(undefined)).toBe('application/json')
    expect(chooseResponseType('*/*')).toBe('application/json')
    expect(chooseResponseType('application/x-yaml')).toBe('application/x-yaml')
    expect(chooseResponseType('application/json;q=0.5, text/yaml')).toBe('application/x-yaml')
    expect(chooseResponseType('text/html,application/xhtml+xml,*/*;q=0.8')).toBe('application/json')
    expect(chooseResponseType('text/html')).toBeUndefined()
  })

  it('writes YAML without anchors and aliases for values that appear twice', () => {
    const shared = { args: [1] }
    expect(serialize({ a: shared, b: shared }, 'application/x-yaml')).toBe('a:\n  args:\n    - 1\nb:\n  args:\n    - 1\n')
  })

  it("writes Salt's SSE record: a tag line, then the event as JSON", () => {
    expect(sseRecord({ tag: 'salt/job/1/new', data: { minions: ['a'] } }).toString()).toBe(
      'tag: salt/job/1/new\ndata: {"tag":"salt/job/1/new","data":{"minions":["a"]}}\n\n',
    )
  })
})

describe('the app without a master', () => {
  async function app(rest: Record<string, unknown>, enabled: string[] = ['local']) {
    const opts = {
      ...defaultsFor('master'),
      sock_dir: '/nonexistent/brine-sock',
      netapi_enable_clients: enabled,
      rest_cherrypy: { port: 0, disable_ssl: true, ...rest },
    } as unknown as MasterConfig
    const { settings } = apiSettings(opts)
    const link = new ApiMasterClient(opts)
    const streams = new EventStreams({ events: link.events, bufferBytes: 1024, maxStreams: 1, recheckMs: 1000, tokenLive: async () => true })
    return createApiApp({ link, settings, streams })
  }

  it("maps the master's login refusals to 429 with the retry time and its FrameLimitError to 413/400, never 500", async () => {
    const opts = { ...defaultsFor('master'), sock_dir: '/nonexistent/brine-sock' } as unknown as MasterConfig
    const link = new ApiMasterClient(opts)
    // As the client raises them: its own error around the master's RemoteError (context on the cause).
    const wrapped = (name: string, context: ErrorContext): Error => {
      const remote = new RemoteError({ name, message: 'refused', context }, 'tcp://127.0.0.1:4506')
      return new EauthError(`the master refused mk_token: ${remote.message}`, { remoteName: name }, { cause: remote })
    }
    const limited = link.httpError(wrapped('LoginRateLimitedError', { key: 'eauth_rate_limit_user', retryAfter: 42 }), 'mk_token')
    expect(limited).toMatchObject({ status: 429, retryAfter: 42 })
    expect(link.httpError(wrapped('LoginBusyError', { key: 'eauth_hash_backlog', retryAfter: 1 }), 'mk_token')).toMatchObject({ status: 429, retryAfter: 1 })
    // As the transport raises it: the master's FrameLimitError, naming the bound.
    const frame = (key: string): Error => errorFromJSON(new FrameLimitError(key, `over ${key}`, 1, 9).toJSON(), 'tcp://127.0.0.1:4506')
    expect(link.httpError(frame('max_frame_entries'), 'publish')).toMatchObject({ status: 413 })
    expect(link.httpError(frame('max_frame_depth'), 'publish')).toMatchObject({ status: 400 })
    await link.close()
  })

  it('answers a body over the entry or depth bound with 413 or 400 naming the key, and a hook path that cannot be a tag with 400', async () => {
    const server = await app({ webhook_disable_auth: true })
    const deep = `[{"client": "local", "tgt": "*", "fun": "test.arg", "arg": [${'['.repeat(5000)}1${']'.repeat(5000)}]}]`
    const tooDeep = await server.inject({ method: 'POST', url: '/run', payload: deep, headers: { 'content-type': 'application/json' } })
    expect(tooDeep.statusCode).toBe(400)
    expect(tooDeep.json()).toEqual({ status: 400, return: 'the request body nests containers more than 64 deep, over max_frame_depth (64)' })
    const hook = await server.inject({ method: 'POST', url: '/hook/a%0Ab%09c', payload: {} })
    expect(hook.statusCode).toBe(400)
    expect(hook.json()).toEqual({ status: 400, return: expect.stringContaining('U+000A') })
    await server.close()
  })

  it('answers as salt-api: exactly application/json, 405 with Allow for a method the path does not serve, 200 to a CORS preflight, 401 for POST /keys without the eauth trio', async () => {
    const server = await app({})
    const welcome = await server.inject({ method: 'GET', url: '/' })
    expect(welcome.headers['content-type']).toBe('application/json')
    const yaml = await server.inject({ method: 'GET', url: '/', headers: { accept: 'application/x-yaml' } })
    expect(yaml.headers['content-type']).toBe('application/x-yaml')
    for (const [method, url, allow] of [
      ['GET', '/run', 'POST'],
      ['GET', '/logout', 'POST'],
      ['GET', '/token', 'POST'],
      ['GET', '/hook/a/b', 'POST'],
      ['POST', '/stats', 'GET, HEAD'],
      ['DELETE', '/', 'GET, HEAD, POST'],
    ] as const) {
      const response = await server.inject({ method, url })
      expect(response.statusCode, `${method} ${url}`).toBe(405)
      expect(response.headers['content-type']).toBe('application/json')
      expect(response.headers['allow'], `${method} ${url}`).toBe(allow)
      expect(response.json()).toEqual({ status: 405, return: expect.stringContaining(`does not serve ${method}`) })
    }
    expect((await server.inject({ method: 'GET', url: '/nope' })).statusCode).toBe(404)
    const preflight = await server.inject({
      method: 'OPTIONS',
      url: '/login',
      headers: { origin: 'https://dash.example', 'access-control-request-method': 'POST' },
    })
    expect(preflight.statusCode).toBe(200)
    expect(preflight.headers['access-control-allow-origin']).toBe('https://dash.example')
    const keys = await server.inject({ method: 'POST', url: '/keys', headers: { 'x-auth-token': 'ab'.repeat(32) }, payload: { mid: 'web9' } })
    expect(keys.statusCode).toBe(401)
    expect(keys.json()).toEqual({ status: 401, return: expect.stringContaining('"username", "password" and "eauth"') })
    await server.close()
  })

  it('answers an ACL refusal with 401 as salt-api does, keeping the rule and marking it refused', async () => {
    const opts = { ...defaultsFor('master'), sock_dir: '/nonexistent/brine-sock' } as unknown as MasterConfig
    const link = new ApiMasterClient(opts)
    const remote = new RemoteError({ name: 'PermissionDeniedError', message: 'user "alice" may not run "cmd.run" on web1' }, 'tcp://127.0.0.1:4506')
    const refusal = new PublishError(`the master refused publish: ${remote.message}`, { remoteName: 'PermissionDeniedError' }, { cause: remote })
    expect(link.httpError(refusal, 'publish')).toMatchObject({ status: 401, refused: true, message: 'user "alice" may not run "cmd.run" on web1' })
    expect(link.httpError(new RemoteError({ name: 'EauthAuthenticationError', message: 'bad' }, 'x'), 'publish')).toMatchObject({ status: 401, refused: false })
    await link.close()
  })

  it('refuses callers outside authorized_ips with 403 and a JSON body', async () => {
    const server = await app({ authorized_ips: ['10.9.9.9'] })
    const response = await server.inject({ method: 'GET', url: '/' })
    expect(response.statusCode).toBe(403)
    expect(response.json()).toEqual({ status: 403, return: 'Bad IP' })
    await server.close()
  })

  it('answers 503 for a lowstate while the master is not there, after the token and list checks', async () => {
    const server = await app({})
    const token = 'ab'.repeat(32)
    const response = await server.inject({
      method: 'POST',
      url: '/',
      headers: { 'x-auth-token': token },
      payload: [{ client: 'local', tgt: '*', fun: 'test.ping' }],
    })
    expect(response.statusCode).toBe(503)
    expect(response.json()).toEqual({ status: 503, return: 'the master is not available (its event bus is not reachable)' })
    const login = await server.inject({ method: 'GET', url: '/login' })
    expect(login.headers['www-authenticate']).toBe('Session')
    expect(login.json()).toEqual({ status: 200, return: 'Please log in' })
    await server.close()
  })
})

describe('event streams before the master', () => {
  it('keep trying to reach the bus and fan its events out once the master is up, leaving no reader behind', async () => {
    const { mkdtemp, rm } = await import('node:fs/promises')
    const { tmpdir } = await import('node:os')
    const { join } = await import('node:path')
    const { EventBus } = await import('../../master/src/index.js')
    const { MasterEvent } = await import('@brine/client')
    const { deadline } = await import('@brine/transport-compliance')
    const sockDir = await mkdtemp(join(tmpdir(), 'ba-'))
    const events = new MasterEvent({ sockDir, reconnect: { initial: 50, max: 200 } })
    const { createLogger } = await import('@brine/core')
    let failedAttempt: () => void = () => {}
    const failed = new Promise<void>((resolve) => (failedAttempt = resolve))
    const logger = createLogger({ level: 'debug', name: 'api-test', write: (line) => (line.includes('not reachable yet') ? failedAttempt() : undefined) })
    const streams = new EventStreams({ events, bufferBytes: 1024, maxStreams: 1, recheckMs: 60_000, tokenLive: async () => true, logger })
    streams.start()
    const bus = new EventBus({ sockDir })
    try {
      // Nothing to read yet: the first attempt fails, and leaves no reader registered.
      await deadline(failed, 10_000, 'a first attempt that finds no bus')
      expect(events.readerCount).toBe(0)
      await bus.start()
      await deadline(
        (async () => {
          while (streams.stats().events === 0) {
            bus.fire('salt/test/hello', {})
            await new Promise((resolve) => setTimeout(resolve, 50))
          }
        })(),
        10_000,
        'the hub to read an event once the bus is up',
      )
      expect(events.connected).toBe(true)
      expect(events.readerCount).toBe(1)
    } finally {
      await streams.close()
      await events.close()
      await bus.close()
      await rm(sockDir, { recursive: true, force: true })
    }
  })
})
