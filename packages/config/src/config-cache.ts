import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** A config file's keys as its YAML parsed to: the values, and the line of each key (three levels deep). */
export interface ParsedConfigFile {
  values: Record<string, unknown>
  lines: Map<string, number>
}

/**
 * What {@link loadConfig} may take a file's parse from instead of parsing its YAML again (its `parseCache` option).
 * A hit must be exactly what the text parsed to when it was kept; a file that did not parse is never kept.
 */
export interface ConfigParseCache {
  /** What `text`, read from `file`, parsed to, when it was kept. */
  get(file: string, text: string): ParsedConfigFile | undefined
  /** Keeps what `text`, read from `file`, parsed to. */
  set(file: string, text: string, parsed: ParsedConfigFile): void
}

/** Changes when the entries' shape or what a parse yields changes, so older entries are passed over. */
const ENTRY_VERSION = 1

/**
 * The most entries kept: one per config file a user's commands read (a few), with room for the many short-lived config
 * directories of a test run; past it the least recently written go.
 */
export const MAX_CONFIG_CACHE_ENTRIES = 64

/** Deeper than any config file nests; a deeper value is not kept. */
const MAX_DEPTH = 64

interface Entry {
  version: number
  file: string
  text: string
  values: Record<string, unknown>
  lines: Array<[string, number]>
}

/** FNV-1a of the file's path: the entry's name (the entry repeats the path, so a collision is only a miss). */
function entryName(file: string): string {
  let hash = 0x811c9dc5
  for (let i = 0; i < file.length; i++) hash = Math.imul(hash ^ file.charCodeAt(i), 0x01000193) >>> 0
  return `${hash.toString(16).padStart(8, '0')}.json`
}

/**
 * Whether JSON gives `value` back exactly: plain objects and arrays (none reached twice, as a YAML alias would be),
 * strings, booleans, null and finite numbers other than -0. Not a Buffer (`!!binary`), -0, NaN or Infinity (`.nan`, `.inf`).
 */
export function survivesJson(value: unknown, depth = 0, seen = new Set<object>()): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true
  if (typeof value === 'number') return Number.isFinite(value) && !Object.is(value, -0)
  if (typeof value !== 'object' || depth >= MAX_DEPTH || seen.has(value)) return false
  seen.add(value)
  if (Array.isArray(value)) return value.every((item) => survivesJson(item, depth + 1, seen))
  if (Object.getPrototypeOf(value) !== Object.prototype) return false
  return Object.entries(value).every(([key, item]) => key !== '__proto__' && survivesJson(item, depth + 1, seen))
}

/**
 * Reads an entry only from a file of this user's that no one else may write: it stands in for a config file, so it
 * must not be anyone else's to change.
 */
function readOwnFile(path: string): string {
  const fd = openSync(path, 'r')
  try {
    const stat = fstatSync(fd)
    const uid = process.getuid?.()
    if ((uid !== undefined && stat.uid !== uid) || (stat.mode & 0o022) !== 0) throw new Error(`${path} is not this user's alone`)
    return readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
}

/** Removes the least recently written entries of `dir` beyond {@link MAX_CONFIG_CACHE_ENTRIES}. */
function prune(dir: string): void {
  const names = readdirSync(dir).filter((name) => name.endsWith('.json'))
  if (names.length <= MAX_CONFIG_CACHE_ENTRIES) return
  const written = names.map((name) => ({ path: join(dir, name), at: statSync(join(dir, name), { throwIfNoEntry: false })?.mtimeMs ?? 0 }))
  written.sort((a, b) => a.at - b.at)
  for (const { path } of written.slice(0, written.length - MAX_CONFIG_CACHE_ENTRIES)) rmSync(path, { force: true })
}

/**
 * A {@link ConfigParseCache} in `dir` (created mode 0700; each entry a JSON file of mode 0600 holding the file's path,
 * its text and its parse). Meant for short-lived commands, which read the same config on every run and would otherwise
 * load and run the YAML parser each time for a few lines of text. An entry is used only when the file's text is
 * exactly the text it was made from; one that cannot be read or written costs only the speed.
 */
export function fileConfigParseCache(dir: string): ConfigParseCache {
  return {
    get(file, text) {
      try {
        const entry = JSON.parse(readOwnFile(join(dir, entryName(file)))) as Entry
        if (entry.version !== ENTRY_VERSION || entry.file !== file || entry.text !== text) return undefined
        return { values: entry.values, lines: new Map(entry.lines) }
      } catch {
        return undefined
      }
    },
    set(file, text, parsed) {
      if (!survivesJson(parsed.values)) return
      const entry: Entry = { version: ENTRY_VERSION, file, text, values: parsed.values, lines: [...parsed.lines] }
      const path = join(dir, entryName(file))
      // Written whole, then renamed over the entry: a reader never sees half of one.
      const temporary = `${path}.${process.pid}.tmp`
      try {
        mkdirSync(dir, { recursive: true, mode: 0o700 })
        writeFileSync(temporary, JSON.stringify(entry), { mode: 0o600 })
        renameSync(temporary, path)
        prune(dir)
      } catch {
        try {
          rmSync(temporary, { force: true })
        } catch {
          // Only the speed-up is lost.
        }
      }
    },
  }
}
