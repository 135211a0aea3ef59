import { readdirSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

/** The REST API reference (docs/rest-api.md): its endpoint table's rows. */
const ROWS = readFileSync(new URL('../../../docs/rest-api.md', import.meta.url), 'utf8')
  .split('\n')
  .filter((line) => line.startsWith('| `'))
  .map((line) => line.split('|')[1]!)

const ROUTES_DIR = new URL('../src/routes/', import.meta.url)

/** Every route the API's plugins register with a literal path: `GET /jobs/:jid` → method and path. */
function registeredRoutes(): Array<{ method: string; path: string }> {
  const routes: Array<{ method: string; path: string }> = []
  for (const file of readdirSync(ROUTES_DIR).filter((name) => name.endsWith('.ts'))) {
    const source = readFileSync(new URL(file, ROUTES_DIR), 'utf8')
    for (const match of source.matchAll(/\bapp\.(get|post|put|delete|patch)(?:<[^>]*>)?\(\s*'([^']+)'/g))
      routes.push({ method: match[1]!.toUpperCase(), path: match[2]! })
  }
  return routes
}

/** Whether a row of the table names `method` and the route's path without its parameters (`/jobs/:jid` → `/jobs`). */
function documented(method: string, path: string): boolean {
  const base = path.replace(/\/:.*$/, '') || '/'
  const pathPattern = new RegExp(`${base.replace(/[/]/g, '\\/')}(?![\\w-])`)
  return ROWS.some((cell) => cell.includes(method) && pathPattern.test(cell))
}

describe('the REST API reference', () => {
  it('has a row for every route the API registers, with its method', () => {
    const routes = registeredRoutes()
    expect(routes.length).toBeGreaterThan(15)
    expect(routes.filter((route) => !documented(route.method, route.path)).map((route) => `${route.method} ${route.path}`)).toEqual([])
  })
})
