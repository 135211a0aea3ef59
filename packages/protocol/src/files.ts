/**
 * The file server's share of the protocol (docs/file-server.md): Salt's `salt://path?saltenv=env` URLs,
 * the sealed commands a minion uses to read the master's `file_roots` and push files to it, and the
 * typed error a path outside the roots is refused with, on the master and again on the minion.
 */
import { BrineError, registerErrors } from '@brine/core'

/** The sealed commands of the file server, named as Salt's master names them (`_serve_file`, …). */
export const FILE_COMMANDS = ['_serve_file', '_file_hash', '_file_list', '_dir_list', '_file_envs', '_file_recv'] as const
export type FileCommand = (typeof FILE_COMMANDS)[number]

/** The environment a `salt://` URL without `?saltenv=` (and a call without `saltenv`) reads. */
export const DEFAULT_SALTENV = 'base'

/** A path refused by the file server: `..`, absolute, a NUL, a symlink leading out of the roots, an ignored file. */
export class FileServerPathError extends BrineError {
  override name = 'FileServerPathError'
  readonly path: string
  readonly saltenv: string
  readonly problem: string
  constructor(path: string, saltenv: string, problem: string) {
    const shown = path.slice(0, 300)
    super(`file server path ${JSON.stringify(shown)} (saltenv ${saltenv}) refused: ${problem}`, { path: shown, saltenv, problem })
    this.path = shown
    this.saltenv = saltenv
    this.problem = problem
  }
}

/** A `salt://` URL that cannot be read (not salt://, an empty path, an unknown query key). */
export class SaltUrlError extends BrineError {
  override name = 'SaltUrlError'
  constructor(url: string, problem: string) {
    super(`invalid salt:// URL ${JSON.stringify(url.slice(0, 300))}: ${problem}`, { url: url.slice(0, 300), problem })
  }
}

export interface SaltUrl {
  /** The path under the environment's roots, without a leading slash. */
  path: string
  /** From `?saltenv=`, else undefined (the caller's saltenv, then `base`, applies). */
  saltenv: string | undefined
}

export const isSaltUrl = (value: string): boolean => value.startsWith('salt://')

/**
 * Reads `salt://path[?saltenv=env]` as Salt's `salt.utils.url.parse` does: `salt://|path` escapes a
 * literal `?` in the path; a leading `/` of the path is dropped. Whether the path stays inside the
 * roots is the master's check, not this one's.
 */
export function parseSaltUrl(url: string): SaltUrl {
  if (!isSaltUrl(url)) throw new SaltUrlError(url, 'it does not start with salt://')
  let rest = url.slice('salt://'.length)
  let saltenv: string | undefined
  if (rest.startsWith('|')) rest = rest.slice(1)
  else {
    const query = rest.indexOf('?')
    if (query !== -1) {
      for (const pair of rest.slice(query + 1).split('&')) {
        const [key, value = ''] = pair.split('=', 2) as [string, string?]
        if (key !== 'saltenv') throw new SaltUrlError(url, `unknown query key ${JSON.stringify(key.slice(0, 40))} (only saltenv)`)
        if (value === '') throw new SaltUrlError(url, 'saltenv is empty')
        saltenv = decodeURIComponent(value)
      }
      rest = rest.slice(0, query)
    }
  }
  const path = rest.replace(/^\/+/, '')
  if (path === '') throw new SaltUrlError(url, 'the path is empty')
  return { path, saltenv }
}

registerErrors({ FileServerPathError, SaltUrlError })
