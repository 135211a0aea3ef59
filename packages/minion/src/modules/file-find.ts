/**
 * `file.find`: Salt's approximation of Unix find (salt/utils/find.py), the common options. Walks
 * without following symlinks, and stops at a bound on results so a find over `/` cannot flood a return.
 */
import type { Dirent, Stats } from 'node:fs'
import { lstat, readdir } from 'node:fs/promises'
import { basename, join } from 'node:path'
import { secondsFromMs } from '@brine/config'
import { translatePythonRegex } from '@brine/targeting'
import { InvocationError } from '../errors.js'
import { cleanKwargs, fnmatch } from './args.js'
import type { JobContext } from './types.js'
import { badArgument, execArgv, requireString, toInteger } from './validate.js'

/** Paths returned at most; past it the list ends with a marker saying so. */
export const MAX_FIND_RESULTS = 100_000

const OPTIONS = ['name', 'iname', 'regex', 'iregex', 'type', 'maxdepth', 'mindepth', 'size', 'mtime', 'user', 'group'] as const

type Test = (path: string, stats: Stats) => boolean

const SIZE_UNITS: Record<string, number> = { b: 512, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4, w: 2 }
const TIME_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 }

/** `[+-]N<unit>` → a comparison on a number (`+`: more than, `-`: less than, none: equal after rounding). */
function comparison(value: unknown, name: string, units: Record<string, number>, fallbackUnit: string): (quantity: number) => boolean {
  const text = requireString(value, name)
  const match = /^([+-]?)(\d+)([a-z]?)$/i.exec(text.trim())
  const unit = units[(match?.[3] || fallbackUnit).toLowerCase()]
  if (match === null || unit === undefined) throw badArgument(name, `[+-]N with a unit of ${Object.keys(units).join(', ')}`, value)
  const amount = Number(match[2]) * unit
  if (match[1] === '+') return (quantity) => quantity > amount
  if (match[1] === '-') return (quantity) => quantity < amount
  return (quantity) => Math.ceil(quantity / unit) === Number(match[2])
}

function typeTest(value: unknown): Test {
  const letters = requireString(value, 'type')
  if (!/^[fdlbcps]+$/.test(letters)) throw badArgument('type', 'letters of f, d, l, b, c, p, s', value)
  return (_path, stats) =>
    (letters.includes('f') && stats.isFile()) ||
    (letters.includes('d') && stats.isDirectory()) ||
    (letters.includes('l') && stats.isSymbolicLink()) ||
    (letters.includes('b') && stats.isBlockDevice()) ||
    (letters.includes('c') && stats.isCharacterDevice()) ||
    (letters.includes('p') && stats.isFIFO()) ||
    (letters.includes('s') && stats.isSocket())
}

function regexTest(value: unknown, name: string, ignoreCase: boolean): Test {
  const pattern = requireString(value, name)
  let regex: RegExp
  try {
    const translated = translatePythonRegex(ignoreCase ? `(?i)${pattern}` : pattern)
    regex = new RegExp(translated.source, translated.flags)
  } catch (error) {
    throw new InvocationError(`${name} is not a valid regular expression: ${(error as Error).message}`, { argument: name })
  }
  return (path) => regex.test(path)
}

async function ownerTest(ctx: JobContext, value: unknown, name: 'user' | 'group'): Promise<Test> {
  const text = requireString(value, name)
  let id = /^\d+$/.test(text) ? Number(text) : Number.NaN
  if (Number.isNaN(id)) {
    const result = await execArgv(ctx, ['getent', name === 'user' ? 'passwd' : 'group', text], { timeout: 10 })
    id = result.retcode === 0 ? Number(result.stdout.split(':')[2]) : Number.NaN
    if (!Number.isInteger(id)) throw new InvocationError(`${name} ${JSON.stringify(text)} does not exist`, { argument: name })
  }
  return name === 'user' ? (_path, stats) => stats.uid === id : (_path, stats) => stats.gid === id
}

async function buildTests(ctx: JobContext, options: Record<string, unknown>): Promise<Test[]> {
  const tests: Test[] = []
  if (options.name !== undefined) {
    const pattern = requireString(options.name, 'name')
    tests.push((path) => fnmatch(basename(path), pattern))
  }
  if (options.iname !== undefined) {
    const pattern = requireString(options.iname, 'iname').toLowerCase()
    tests.push((path) => fnmatch(basename(path).toLowerCase(), pattern))
  }
  if (options.regex !== undefined) tests.push(regexTest(options.regex, 'regex', false))
  if (options.iregex !== undefined) tests.push(regexTest(options.iregex, 'iregex', true))
  if (options.type !== undefined) tests.push(typeTest(options.type))
  if (options.size !== undefined) {
    const compare = comparison(options.size, 'size', SIZE_UNITS, 'b')
    tests.push((_path, stats) => compare(stats.size))
  }
  if (options.mtime !== undefined) {
    const compare = comparison(options.mtime, 'mtime', TIME_UNITS, 'd')
    const now = Date.now()
    tests.push((_path, stats) => compare(secondsFromMs(now - stats.mtimeMs)))
  }
  if (options.user !== undefined) tests.push(await ownerTest(ctx, options.user, 'user'))
  if (options.group !== undefined) tests.push(await ownerTest(ctx, options.group, 'group'))
  return tests
}

/** Runs file.find under `root` with Salt's keyword options; an unknown option is refused by name. */
export async function findFiles(ctx: JobContext, root: string, kwargs: Record<string, unknown>): Promise<string[]> {
  const options = cleanKwargs(kwargs)
  const unknown = Object.keys(options).filter((key) => !(OPTIONS as readonly string[]).includes(key) && key !== 'print')
  if (unknown.length > 0)
    throw new InvocationError(`unknown find option ${unknown.map((key) => `'${key}'`).join(', ')} (known: ${OPTIONS.join(', ')})`, {
      argument: unknown[0] as string,
    })
  if (options.print !== undefined && options.print !== 'path') throw badArgument('print', "'path' (the only output Brine's file.find gives)", options.print)
  const maxDepth = options.maxdepth === undefined ? Number.MAX_SAFE_INTEGER : toInteger(options.maxdepth, 'maxdepth', 0)
  const minDepth = options.mindepth === undefined ? 0 : toInteger(options.mindepth, 'mindepth', 0)
  const tests = await buildTests(ctx, options)
  const found: string[] = []
  const visit = async (path: string, depth: number): Promise<boolean> => {
    if (ctx.signal.aborted) return false
    const stats = await lstat(path).catch(() => undefined)
    if (stats === undefined) return true
    if (depth >= minDepth && tests.every((test) => test(path, stats))) {
      if (found.length >= MAX_FIND_RESULTS) {
        found.push(`[brine: output truncated at ${MAX_FIND_RESULTS} paths]`)
        return false
      }
      found.push(path)
    }
    if (!stats.isDirectory() || depth >= maxDepth) return true
    const entries: Dirent[] = await readdir(path, { withFileTypes: true }).catch(() => [])
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (!(await visit(join(path, entry.name), depth + 1))) return false
    }
    return true
  }
  await visit(root, 0)
  return found
}
