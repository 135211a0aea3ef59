/**
 * Salt's `roots` file server backend: `file_roots` maps each environment to directories searched in
 * order, the first holding a path serves it. Every path a minion names is confined here: a `..`
 * segment, an absolute path or a NUL is refused before the disk is touched, and the real path of what
 * is found (symlinks resolved) must still lie under the real path of its root.
 */
import { realpath, readdir, stat } from 'node:fs/promises'
import { join, sep } from 'node:path'
import { ConfigError } from '@brine/config'
import { FileServerPathError } from '@brine/protocol'
import { globToRegExp, translatePythonRegex } from '@brine/targeting'

/** Files and directories listed per environment, at most: a runaway tree cannot grow a reply without bound. */
export const MAX_LISTED_ENTRIES = 100_000
/** How deep a listing walks below a root. */
const MAX_DEPTH = 64

/** A file found under the roots. */
export interface FoundFile {
  /** The real path on the master's disk (symlinks resolved). */
  real: string
  /** The root it was found under, as configured. */
  root: string
  size: number
}

export interface FileRootsOptions {
  /** `file_roots`: environment → directories. */
  roots: Record<string, unknown>
  /** `file_ignore_regex`: Python regular expressions searched in each relative path. */
  ignoreRegex?: readonly string[]
  /** `file_ignore_glob`: fnmatch patterns matched against each relative path. */
  ignoreGlob?: readonly string[]
}

const within = (real: string, root: string): boolean => real === root || real.startsWith(root.endsWith(sep) ? root : root + sep)

/** The environments and their roots, checked: a mapping of names to lists of strings. */
function readRoots(roots: Record<string, unknown>): Map<string, string[]> {
  const out = new Map<string, string[]>()
  for (const [env, dirs] of Object.entries(roots)) {
    const list = typeof dirs === 'string' ? [dirs] : dirs
    if (!Array.isArray(list) || !list.every((dir) => typeof dir === 'string' && dir !== '')) {
      throw new ConfigError(`file_roots: environment ${JSON.stringify(env)} must be a list of directories`, { key: 'file_roots' })
    }
    out.set(env, list as string[])
  }
  return out
}

export class FileRoots {
  readonly #roots: Map<string, string[]>
  readonly #ignore: RegExp[]

  constructor(options: FileRootsOptions) {
    this.#roots = readRoots(options.roots)
    this.#ignore = [
      ...(options.ignoreRegex ?? []).map((pattern) => {
        try {
          const translated = translatePythonRegex(pattern)
          return new RegExp(translated.source, translated.flags)
        } catch (error) {
          throw new ConfigError(`file_ignore_regex: ${JSON.stringify(pattern)} is not a valid regular expression (${(error as Error).message})`, {
            key: 'file_ignore_regex',
          })
        }
      }),
      ...(options.ignoreGlob ?? []).map((pattern) => globToRegExp(pattern)),
    ]
  }

  /** Salt's fileserver.envs: the environments, sorted. */
  envs(): string[] {
    return [...this.#roots.keys()].sort()
  }

  /** The configured roots of each environment (Salt's file_roots as the master reads it). */
  roots(): Record<string, string[]> {
    return Object.fromEntries([...this.#roots].map(([env, dirs]) => [env, [...dirs]]))
  }

  /** True when file_ignore_regex or file_ignore_glob hides `relative`. */
  ignored(relative: string): boolean {
    // A glob compiled with ^…$ matches the whole path; a regex is searched anywhere in it, as re.search does.
    return this.#ignore.some((pattern) => pattern.test(relative))
  }

  /**
   * `path` checked as a minion may name it: relative, no `..` or `.` segment games, no NUL, not ignored.
   * Returns the normalised relative path (no leading or doubled slashes). FileServerPathError otherwise.
   */
  check(path: unknown, saltenv: string): string {
    if (typeof path !== 'string' || path === '') throw new FileServerPathError(String(path), saltenv, 'the path must be a non-empty string')
    if (path.includes('\0')) throw new FileServerPathError(path, saltenv, 'the path contains a NUL byte')
    if (path.includes('\\')) throw new FileServerPathError(path, saltenv, 'the path contains a backslash')
    const segments = path.split('/').filter((segment) => segment !== '' && segment !== '.')
    if (segments.includes('..')) throw new FileServerPathError(path, saltenv, "'..' leads out of the file roots")
    if (segments.length === 0) throw new FileServerPathError(path, saltenv, 'the path names no file')
    const relative = segments.join('/')
    if (this.ignored(relative)) throw new FileServerPathError(path, saltenv, 'it is hidden by file_ignore_regex or file_ignore_glob')
    return relative
  }

  #rootsOf(saltenv: string, path = ''): string[] {
    const roots = this.#roots.get(saltenv)
    if (roots === undefined) throw new FileServerPathError(path, saltenv, `no such environment (file_roots has: ${this.envs().join(', ') || 'none'})`)
    return roots
  }

  /**
   * The first root of `saltenv` holding file `path`, or undefined when none does. A file reached through
   * a symlink that resolves outside its root is refused (FileServerPathError), not skipped.
   */
  async find(path: unknown, saltenv: string): Promise<FoundFile | undefined> {
    const relative = this.check(path, saltenv)
    for (const root of this.#rootsOf(saltenv, relative)) {
      let real: string
      let realRoot: string
      try {
        realRoot = await realpath(root)
        real = await realpath(join(root, relative))
      } catch {
        continue
      }
      if (!within(real, realRoot)) throw new FileServerPathError(relative, saltenv, 'a symlink leads out of the file roots')
      const info = await stat(real).catch(() => undefined)
      if (info?.isFile() === true) return { real, root, size: info.size }
    }
    return undefined
  }

  /** Salt's file_list / dir_list: relative paths of files (or directories) in `saltenv` (or one of its roots), sorted, starting with `prefix`. */
  async list(saltenv: string, kind: 'files' | 'dirs', prefix = '', onlyRoot?: string): Promise<string[]> {
    const found = new Set<string>()
    for (const root of this.#rootsOf(saltenv)) {
      if (onlyRoot !== undefined && root !== onlyRoot) continue
      const realRoot = await realpath(root).catch(() => undefined)
      if (realRoot !== undefined) await this.#walk(realRoot, realRoot, '', kind, found, 0)
    }
    const wanted = prefix.replace(/^\/+/, '')
    return [...found].filter((path) => path.startsWith(wanted)).sort()
  }

  async #walk(realRoot: string, dir: string, relative: string, kind: 'files' | 'dirs', found: Set<string>, depth: number): Promise<void> {
    if (depth > MAX_DEPTH || found.size >= MAX_LISTED_ENTRIES) return
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => [])
    for (const entry of entries) {
      const path = relative === '' ? entry.name : `${relative}/${entry.name}`
      if (this.ignored(path)) continue
      const full = join(dir, entry.name)
      // A symlink is listed only when it resolves inside the root, as find() would serve it.
      const real = entry.isSymbolicLink() ? await realpath(full).catch(() => undefined) : full
      if (real === undefined || !within(real, realRoot)) continue
      const info = entry.isSymbolicLink() ? await stat(real).catch(() => undefined) : entry
      if (info === undefined) continue
      if (info.isDirectory()) {
        if (kind === 'dirs') found.add(path)
        if (!entry.isSymbolicLink()) await this.#walk(realRoot, full, path, kind, found, depth + 1)
      } else if (info.isFile() && kind === 'files') found.add(path)
      if (found.size >= MAX_LISTED_ENTRIES) return
    }
  }
}
