/**
 * @packageDocumentation
 * `@brine/console` is Brine's web console: a Preact single-page app (sources in `app/`), built by Vite at
 * build time into static, content-hashed assets with nothing external, which `brine-api` serves at
 * `rest_cherrypy.app_path` (default `/app`). It speaks only the public REST API and its event stream.
 * This module tells the server where the built assets are.
 */
import { existsSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The built console: its directory, its index page, and the folder of its hashed (immutable) assets. */
export interface ConsoleAssets {
  dir: string
  index: string
  /** The sub-folder whose file names carry a content hash (safe to cache forever). */
  hashedDir: string
}

/** Vite's output folder inside dist/, beside this module's own build. */
const APP_FOLDER = 'app'

/**
 * Where the built console is, or undefined when the package was not built (`npm run build` builds it).
 * Works from the built module (dist/index.js) and from the sources (src/index.ts, as the tests load them).
 */
export function consoleAssets(): ConsoleAssets | undefined {
  const here = dirname(fileURLToPath(import.meta.url))
  const dist = basename(here) === 'dist' ? here : join(here, '..', 'dist')
  const dir = join(dist, APP_FOLDER)
  const index = join(dir, 'index.html')
  return existsSync(index) ? { dir, index, hashedDir: join(dir, 'assets') } : undefined
}
