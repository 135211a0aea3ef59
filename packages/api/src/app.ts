import { existsSync, statSync } from 'node:fs'
import { basename, dirname } from 'node:path'
import type { FastifyInstance } from 'fastify'
import fastifyStatic, { type SetHeadersResponse } from '@fastify/static'
import { consoleAssets } from '@brine/console'
import { silentLogger, type Logger } from '@brine/core'
import type { ApiSettings } from './config.js'
import { ApiStartError } from './errors.js'

/**
 * The console's Content-Security-Policy: its own origin only (scripts, styles, the API and its event
 * stream), no inline script, no frames, nothing from any other host.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ')

/** Vite names what it emits under assets/ by content hash: a changed file gets a new name. */
const IMMUTABLE = 'public, max-age=31536000, immutable'
/** Everything else (the index page, a configured app or static folder) is revalidated on every use (ETag). */
const REVALIDATE = 'no-cache'

/** Whether a request path is served by the app or the static folder (no Accept negotiation there). */
export function isAppRequest(settings: ApiSettings, path: string): boolean {
  const under = (prefix: string): boolean => path === prefix || path.startsWith(`${prefix}/`)
  return (settings.app.kind !== 'off' && under(settings.appPath)) || (settings.staticDir !== undefined && under(settings.staticPath))
}

const browserHeaders = (res: SetHeadersResponse, cacheControl: string, csp: boolean): void => {
  res.setHeader('Cache-Control', cacheControl)
  res.setHeader('X-Content-Type-Options', 'nosniff')
  res.setHeader('Referrer-Policy', 'no-referrer')
  if (csp) {
    res.setHeader('Content-Security-Policy', CONSOLE_CSP)
    res.setHeader('X-Frame-Options', 'DENY')
  }
}

/** A configured `app` file or `static` folder must be there when the API starts, not 404 on first use. */
function requirePath(key: string, path: string, kind: 'file' | 'directory'): void {
  const found = existsSync(path) ? statSync(path) : undefined
  if (found === undefined || (kind === 'file' ? !found.isFile() : !found.isDirectory())) {
    throw new ApiStartError(`rest_cherrypy.${key}: ${path} is not a ${kind}`, { key: `rest_cherrypy.${key}`, path })
  }
}

/**
 * Serves the web app as salt-api serves SaltGUI: at `app_path` the bundled console (default), or the HTML
 * file `app` names (every path below `app_path` answers with it, for the app's own routes), or nothing
 * with `app: false`; and the `static` folder at `static_path`.
 */
export async function registerApp(app: FastifyInstance, settings: ApiSettings, logger: Logger = silentLogger): Promise<void> {
  if (settings.app.kind === 'file') requirePath('app', settings.app.file, 'file')
  if (settings.staticDir !== undefined) requirePath('static', settings.staticDir, 'directory')
  let decorated = false
  const appSettings = settings.app
  if (appSettings.kind === 'console') {
    const assets = consoleAssets()
    if (assets === undefined) {
      logger.warning(`the bundled web console is not built (npm run build); ${settings.appPath} answers 503 (or set rest_cherrypy.app: false)`)
      app.get(`${settings.appPath}/*`, async (_request, reply) =>
        reply.code(503).send({ status: 503, return: 'the web console is not built (npm run build builds @brine/console)' }),
      )
    } else {
      await app.register(fastifyStatic, {
        root: assets.dir,
        prefix: `${settings.appPath}/`,
        index: ['index.html'],
        cacheControl: false,
        etag: true,
        setHeaders: (res, path) => browserHeaders(res, path.startsWith(`${assets.hashedDir}/`) ? IMMUTABLE : REVALIDATE, true),
      })
      decorated = true
      // Relative asset URLs resolve against the folder, so the bare prefix moves to its folder form.
      app.get(settings.appPath, async (request, reply) => reply.redirect(`${settings.appPath}/${request.url.slice(settings.appPath.length)}`, 301))
    }
  } else if (appSettings.kind === 'file') {
    const options = { cacheControl: false, setHeaders: (res: SetHeadersResponse) => browserHeaders(res, REVALIDATE, false) }
    await app.register(fastifyStatic, { root: dirname(appSettings.file), serve: false, ...options })
    decorated = true
    const page = basename(appSettings.file)
    app.get(settings.appPath, async (_request, reply) => reply.sendFile(page, options))
    app.get(`${settings.appPath}/*`, async (_request, reply) => reply.sendFile(page, options))
  }
  if (settings.staticDir !== undefined) {
    await app.register(fastifyStatic, {
      root: settings.staticDir,
      prefix: `${settings.staticPath}/`,
      decorateReply: !decorated,
      cacheControl: false,
      setHeaders: (res) => browserHeaders(res, REVALIDATE, false),
    })
  }
}
