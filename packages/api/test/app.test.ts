import { mkdtemp, readdir, rm, writeFile, mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConfigError, defaultsFor, type MasterConfig } from '@brine/config'
import { consoleAssets } from '@brine/console'
import { apiSettings } from '../src/config.js'
import { CONSOLE_CSP } from '../src/app.js'
import { createApiApp } from '../src/server.js'
import { ApiMasterClient } from '../src/api-master-client.js'
import { EventStreams } from '../src/sse.js'

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'

const optsWith = (rest: Record<string, unknown>): MasterConfig =>
  ({
    ...defaultsFor('master'),
    sock_dir: '/nonexistent/brine-sock',
    netapi_enable_clients: ['local'],
    rest_cherrypy: { port: 0, disable_ssl: true, ...rest },
  }) as unknown as MasterConfig

async function app(rest: Record<string, unknown>) {
  const opts = optsWith(rest)
  const { settings } = apiSettings(opts)
  const link = new ApiMasterClient(opts)
  const streams = new EventStreams({ events: link.events, bufferBytes: 1024, maxStreams: 1, recheckMs: 1000, tokenLive: async () => true })
  return createApiApp({ link, settings, streams })
}

describe('rest_cherrypy app, app_path, static, static_path', () => {
  it('default to the bundled console at /app, off with app: false, and name the key of a bad value', () => {
    const { settings } = apiSettings(optsWith({}))
    expect(settings).toMatchObject({ app: { kind: 'console' }, appPath: '/app', staticPath: '/static' })
    expect(settings.staticDir).toBeUndefined()
    expect(apiSettings(optsWith({ app: false })).settings.app).toEqual({ kind: 'off' })
    expect(apiSettings(optsWith({ app: '/srv/saltgui/index.html', app_path: '/gui/', static: '/srv/saltgui/static' })).settings).toMatchObject({
      app: { kind: 'file', file: '/srv/saltgui/index.html' },
      appPath: '/gui',
      staticDir: '/srv/saltgui/static',
    })
    expect(() => apiSettings(optsWith({ app: 3 }))).toThrow(/rest_cherrypy\.app must be false, true .* got 3/)
    expect(() => apiSettings(optsWith({ app_path: 'app' }))).toThrow(ConfigError)
    expect(() => apiSettings(optsWith({ app_path: '/login' }))).toThrow(/rest_cherrypy\.app_path must not take the API's own path \/login/)
    expect(() => apiSettings(optsWith({ static: '/srv/x', static_path: '/app' }))).toThrow(/rest_cherrypy\.static_path must differ from app_path/)
    expect(() => apiSettings(optsWith({ static_path: '/a b' }))).toThrow(/rest_cherrypy\.static_path must be a URL path/)
  })
})

describe('the bundled console', () => {
  let server: Awaited<ReturnType<typeof app>>
  beforeAll(async () => {
    if (consoleAssets() === undefined) throw new Error('@brine/console is not built: run npx lerna run build --scope @brine/console')
    server = await app({})
  })
  afterAll(async () => server?.close())

  it('redirects /app to /app/ and serves the index to a browser: revalidated, with a CSP that allows only its own origin', async () => {
    const bare = await server.inject({ method: 'GET', url: '/app', headers: { accept: BROWSER_ACCEPT } })
    expect(bare.statusCode).toBeGreaterThanOrEqual(301)
    expect(bare.statusCode).toBeLessThanOrEqual(308)
    expect(bare.headers.location).toBe('/app/')
    const index = await server.inject({ method: 'GET', url: '/app/', headers: { accept: BROWSER_ACCEPT } })
    expect(index.statusCode).toBe(200)
    expect(index.headers['content-type']).toMatch(/^text\/html/)
    expect(index.headers['cache-control']).toBe('no-cache')
    expect(index.headers['content-security-policy']).toBe(CONSOLE_CSP)
    expect(CONSOLE_CSP).toContain("default-src 'none'")
    expect(CONSOLE_CSP).not.toMatch(/https?:|\*|unsafe/)
    expect(index.headers['x-frame-options']).toBe('DENY')
    expect(index.headers['x-content-type-options']).toBe('nosniff')
    expect(index.headers['etag']).toBeDefined()
    // Nothing external and no inline script: every script and stylesheet is a relative, hashed asset.
    expect(index.body).not.toMatch(/(src|href)="(https?:)?\/\//)
    expect(index.body).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/)
    expect(index.body).toMatch(/<script type="module" crossorigin src="\.\/assets\/index-[\w-]+\.js">/)
  })

  it('serves the hashed assets as immutable for a year, and 404s what is not there or outside', async () => {
    const assets = await readdir(consoleAssets()!.hashedDir)
    const script = assets.find((name) => name.endsWith('.js'))!
    const js = await server.inject({ method: 'GET', url: `/app/assets/${script}`, headers: { accept: '*/*' } })
    expect(js.statusCode).toBe(200)
    expect(js.headers['content-type']).toMatch(/javascript/)
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable')
    expect(js.headers['content-security-policy']).toBe(CONSOLE_CSP)
    const css = assets.find((name) => name.endsWith('.css'))!
    expect((await server.inject({ method: 'GET', url: `/app/assets/${css}`, headers: { accept: 'text/css,*/*;q=0.1' } })).statusCode).toBe(200)
    expect((await server.inject({ method: 'GET', url: '/app/assets/missing-0000.js' })).statusCode).toBe(404)
    const escape = await server.inject({ method: 'GET', url: '/app/..%2f..%2fpackage.json' })
    expect([403, 404]).toContain(escape.statusCode)
    // The API itself still negotiates: a browser's Accept on an API path is 406.
    expect((await server.inject({ method: 'GET', url: '/login', headers: { accept: 'text/html' } })).statusCode).toBe(406)
  })
})

describe('app: false, and SaltGUI-style app and static', () => {
  let dir: string
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'brine-app-'))
    await writeFile(join(dir, 'index.html'), '<!doctype html><title>gui</title>')
    await mkdir(join(dir, 'static'))
    await writeFile(join(dir, 'static', 'gui.css'), 'body{}')
  })
  afterAll(async () => rm(dir, { recursive: true, force: true }))

  it('refuses to start when the app file or the static folder is not there, naming the key', async () => {
    await expect(app({ app: join(dir, 'missing.html') })).rejects.toThrow(/^rest_cherrypy\.app: .*missing\.html is not a file$/)
    await expect(app({ static: join(dir, 'index.html') })).rejects.toThrow(/^rest_cherrypy\.static: .*index\.html is not a directory$/)
  })

  it('serves no app with app: false', async () => {
    const server = await app({ app: false })
    expect((await server.inject({ method: 'GET', url: '/app/' })).statusCode).toBe(404)
    await server.close()
  })

  it('answers every path under app_path with the app file and serves static at static_path, both revalidated', async () => {
    const server = await app({ app: join(dir, 'index.html'), app_path: '/gui', static: join(dir, 'static') })
    for (const url of ['/gui', '/gui/', '/gui/minions/web1']) {
      const page = await server.inject({ method: 'GET', url, headers: { accept: BROWSER_ACCEPT } })
      expect(page.statusCode, url).toBe(200)
      expect(page.body).toBe('<!doctype html><title>gui</title>')
      expect(page.headers['cache-control']).toBe('no-cache')
    }
    const css = await server.inject({ method: 'GET', url: '/static/gui.css', headers: { accept: 'text/css' } })
    expect(css.statusCode).toBe(200)
    expect(css.body).toBe('body{}')
    expect((await server.inject({ method: 'GET', url: '/app/' })).statusCode).toBe(404)
    await server.close()
  })
})
