/**
 * The minion's side of the file server (Salt's RemoteClient): asks the master for a file's hash first,
 * skips the transfer when the local copy already has it, else pulls the file in `file_buffer_size`
 * chunks into a temporary file beside the target, checks the whole file's hash and renames it into
 * place. Files without a destination land in Salt's cache, `<cachedir>/files/<saltenv>/<path>`.
 */
import { createHash, randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { DEFAULT_SALTENV, FileServerPathError, parseSaltUrl, SaltUrlError } from '@brine/protocol'
import { CommandExecutionError } from './errors.js'
import { NotAcknowledgedError } from '@brine/link'
import type { MasterChannel } from './modules/types.js'

/** The master's answer to `_file_hash`. */
export interface ServerHash {
  hsum: string
  hash_type: string
  size: number
}

export interface FetchOutcome {
  /** Where the file is now. */
  path: string
  /** Bytes that crossed the wire (0: the local copy already had the master's hash). */
  transferred: number
}

export interface FileClientOptions {
  id: string
  cachedir: string
  master: MasterChannel | undefined
  /** `file_buffer_size`: the most bytes one chunk of cp.push carries. */
  bufferSize: number
  signal?: AbortSignal
}

/** Digest of a local file, streamed. */
export async function hashLocalFile(path: string, hashType = 'sha256'): Promise<string> {
  const hash = createHash(hashType)
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

/** Tries per read request: a lost reply on a loaded master costs one chunk again, not the whole transfer. */
const READ_TRIES = 3

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    (info) => info.isFile(),
    () => false,
  )

/** A relative path and environment name safe to join under the cache (the master checked them too). */
function cacheRelative(path: string, saltenv: string): string {
  const segments = path.split('/').filter((segment) => segment !== '' && segment !== '.')
  if (segments.includes('..') || path.includes('\0')) throw new FileServerPathError(path, saltenv, "'..' leads out of the file roots")
  if (saltenv === '' || /[/\\\0]/.test(saltenv) || saltenv === '..' || saltenv === '.')
    throw new FileServerPathError(path, saltenv, 'not a valid environment name')
  return segments.join('/')
}

/**
 * The master's refusal as the minion reports it: a FileServerPathError rebuilt from the master's answer
 * (its message names the path and the reason), anything else as a CommandExecutionError.
 */
export function fromMasterRefusal(error: unknown, path: string, saltenv: string): Error {
  if (!(error instanceof NotAcknowledgedError)) return error instanceof Error ? error : new Error(String(error))
  const context = (error.remote?.context ?? {}) as { problem?: unknown }
  if (error.refusal === 'FileServerPathError')
    return new FileServerPathError(path, saltenv, typeof context.problem === 'string' ? context.problem : String(error.remote?.message ?? error.message))
  return new CommandExecutionError(`${error.refusal ?? 'the master'}: ${String(error.remote?.message ?? error.message)}`, { path, saltenv }, { cause: error })
}

/**
 * A file server refusal as a job reports it: Salt's CommandExecutionError (`ERROR: …` in the return), its
 * message led by the typed error's name (`FileServerPathError: …`), the typed error kept as its cause.
 */
export function asCommandError(error: unknown): unknown {
  if (error instanceof FileServerPathError || error instanceof SaltUrlError)
    return new CommandExecutionError(`${error.name}: ${error.message}`, error.context, { cause: error })
  return error
}

export class FileClient {
  readonly #o: FileClientOptions

  constructor(options: FileClientOptions) {
    this.#o = options
  }

  #master(): MasterChannel {
    if (this.#o.master === undefined) throw new CommandExecutionError('this minion has no master to fetch files from')
    return this.#o.master
  }

  async #ask(load: { cmd: string; [field: string]: unknown }, path: string, saltenv: string): Promise<Record<string, unknown>> {
    // Reads may be sent again by the transport (the master answers a repeat as a duplicate, and the link asks
    // afresh); a pushed chunk goes once, since a repeat would no longer follow the bytes received.
    const tries = load.cmd === '_file_recv' ? 1 : READ_TRIES
    try {
      return await this.#master().request(load, { tries, ...(this.#o.signal === undefined ? {} : { signal: this.#o.signal }) })
    } catch (error) {
      throw fromMasterRefusal(error, path, saltenv)
    }
  }

  /** Where `salt://path` of `saltenv` is cached. */
  cachePath(path: string, saltenv: string): string {
    return join(this.#o.cachedir, 'files', saltenv, cacheRelative(path, saltenv))
  }

  /** `url` (salt://...[?saltenv=]) and the environment it reads: the URL's, else `saltenv`, else base. */
  static resolve(url: string, saltenv: string | null | undefined): { path: string; saltenv: string } {
    const parsed = parseSaltUrl(url)
    return { path: parsed.path, saltenv: parsed.saltenv ?? saltenv ?? DEFAULT_SALTENV }
  }

  /** The master's `{hsum, hash_type, size}` for the file, or undefined when no root holds it. */
  async hash(path: string, saltenv: string): Promise<ServerHash | undefined> {
    const answer = await this.#ask({ cmd: '_file_hash', path, saltenv }, path, saltenv)
    if (typeof answer['hsum'] !== 'string' || answer['hsum'] === '') return undefined
    return { hsum: answer['hsum'], hash_type: String(answer['hash_type']), size: Number(answer['size']) }
  }

  /**
   * Brings `salt://path` of `saltenv` to `target` (default: its cache path). Undefined when the master
   * holds no such file. Nothing is transferred when `target` already has the master's hash.
   */
  async fetch(path: string, saltenv: string, target = this.cachePath(path, saltenv)): Promise<FetchOutcome | undefined> {
    const remote = await this.hash(path, saltenv)
    if (remote === undefined) return undefined
    if ((await exists(target)) && (await hashLocalFile(target, remote.hash_type)) === remote.hsum) return { path: target, transferred: 0 }
    await mkdir(dirname(target), { recursive: true })
    const partial = `${target}.partial-${randomBytes(4).toString('hex')}`
    try {
      const transferred = await this.#pull(path, saltenv, partial, remote)
      const got = await hashLocalFile(partial, remote.hash_type)
      if (got !== remote.hsum)
        throw new CommandExecutionError(
          `salt://${path} (saltenv ${saltenv}) changed on the master while it was sent (${remote.hash_type} ${got}, expected ${remote.hsum}); try again`,
          { path, saltenv },
        )
      await rename(partial, target)
      return { path: target, transferred }
    } finally {
      await rm(partial, { force: true })
    }
  }

  /** Pulls the chunks in order into `partial`; bounded by the size the master announced. */
  async #pull(path: string, saltenv: string, partial: string, remote: ServerHash): Promise<number> {
    const handle = await open(partial, 'w', 0o600)
    let loc = 0
    try {
      for (;;) {
        this.#o.signal?.throwIfAborted()
        const answer = await this.#ask({ cmd: '_serve_file', path, saltenv, loc }, path, saltenv)
        const data = answer['data']
        if (!(data instanceof Uint8Array)) throw new CommandExecutionError(`the master sent no data for salt://${path} at ${loc}`, { path, saltenv })
        if (data.length === 0) return loc
        if (loc + data.length > remote.size)
          throw new CommandExecutionError(`salt://${path} (saltenv ${saltenv}) grew on the master while it was sent; try again`, { path, saltenv })
        await handle.write(data, 0, data.length, loc)
        loc += data.length
      }
    } finally {
      await handle.close()
    }
  }

  /** Salt's file_list / dir_list on the master. */
  async list(kind: 'files' | 'dirs', saltenv: string, prefix = ''): Promise<string[]> {
    const answer = await this.#ask({ cmd: kind === 'files' ? '_file_list' : '_dir_list', saltenv, prefix }, prefix, saltenv)
    const listed = answer[kind]
    return Array.isArray(listed) ? listed.filter((item): item is string => typeof item === 'string') : []
  }

  async envs(): Promise<string[]> {
    const answer = await this.#ask({ cmd: '_file_envs' }, '', DEFAULT_SALTENV)
    return Array.isArray(answer['envs']) ? answer['envs'].filter((item): item is string => typeof item === 'string') : []
  }

  /** Files of `saltenv` in this minion's cache (Salt's cp.list_minion), relative, sorted. */
  async listCached(saltenv: string): Promise<string[]> {
    cacheRelative('.', saltenv)
    const base = join(this.#o.cachedir, 'files', saltenv)
    const out: string[] = []
    const walk = async (dir: string, relative: string, depth: number): Promise<void> => {
      if (depth > 64) return
      for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
        const path = relative === '' ? entry.name : `${relative}/${entry.name}`
        if (entry.isDirectory()) await walk(join(dir, entry.name), path, depth + 1)
        else if (entry.isFile() && !entry.name.includes('.partial-')) out.push(path)
      }
    }
    await walk(base, '', 0)
    return out.sort()
  }

  /**
   * Salt's cp.push: sends local file `source` to the master in chunks, stored there under `parts` (a
   * list of path components). The master's refusal (file_recv off, too large) rejects.
   */
  async push(source: string, parts: readonly string[]): Promise<number> {
    const handle = await open(source, 'r')
    try {
      const size = (await handle.stat()).size
      const buffer = Buffer.allocUnsafe(Math.max(1, this.#o.bufferSize))
      let loc = 0
      do {
        this.#o.signal?.throwIfAborted()
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, loc)
        await this.#ask({ cmd: '_file_recv', path: [...parts], size, loc, data: buffer.subarray(0, bytesRead) }, parts.join('/'), DEFAULT_SALTENV)
        loc += bytesRead
        if (bytesRead === 0) break
      } while (loc < size)
      return loc
    } finally {
      await handle.close()
    }
  }
}
