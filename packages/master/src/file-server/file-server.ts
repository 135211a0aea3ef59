/**
 * The master's file server (docs/file-server.md): answers a minion's sealed file commands — Salt's
 * `_file_hash`, `_serve_file` (one chunk of `file_buffer_size` bytes at `loc`), `_file_list`,
 * `_dir_list`, `_file_envs` — from the {@link FileRoots}, and stores what `cp.push` sends
 * (`_file_recv`) under `cachedir/minions/<id>/files/` when `file_recv` allows it.
 */
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { mkdir, open, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { DEFAULT_SALTENV, type FileCommand } from '@brine/protocol'
import { BrineError, LruMap, silentLogger, registerErrors, type Logger } from '@brine/core'
import { MalformedRequestError } from '@brine/protocol'
import { FileRoots, type FoundFile } from './roots.js'

/** What the file server has done since the master started: what tests and `fileserver.stats` read. */
export interface FileServerStats {
  /** Hash requests answered (each cp fetch asks first). */
  hashes: number
  /** Files whose first chunk was served. */
  files_served: number
  chunks_served: number
  bytes_served: number
  /** Files pushed by minions and stored (first chunk taken). */
  files_received: number
  bytes_received: number
}

export interface FileServerOptions {
  roots: FileRoots
  /** `file_buffer_size`, bytes per chunk. */
  bufferSize: number
  /** `hash_type`: the digest minions compare their cache with. */
  hashType: string
  /** `file_recv`: whether cp.push is taken at all. */
  recv: boolean
  /** `file_recv_max_size` in bytes. */
  recvMaxBytes: number
  /** The master's cachedir; pushed files go to `<cachedir>/minions/<id>/files/`. */
  cachedir: string
  logger?: Logger
}

/** A cp.push the master will not take: file_recv off, over file_recv_max_size, a bad path or a gap in the chunks. */
export class FileRecvRefusedError extends BrineError {
  override name = 'FileRecvRefusedError'
  constructor(id: string, path: string, reason: string) {
    super(`cp.push of ${JSON.stringify(path.slice(0, 300))} from minion ${JSON.stringify(id)} refused: ${reason}`, { id, path: path.slice(0, 300), reason })
  }
}

function saltenvOf(load: Record<string, unknown>): string {
  const env = load['saltenv'] ?? DEFAULT_SALTENV
  if (typeof env !== 'string' || env === '' || env.length > 256)
    throw new MalformedRequestError('file server load', "field 'saltenv' must be a non-empty string")
  return env
}

function nonNegativeInteger(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw new MalformedRequestError('file server load', `field '${field}' must be a non-negative integer`)
  return value
}

export class FileServer {
  readonly roots: FileRoots
  readonly #o: FileServerOptions
  readonly #logger: Logger
  /** Digests by real path, size and mtime: a 50 MB file is hashed once, not at every fetch. */
  readonly #hashes = new LruMap<string, string>(1024)
  readonly #stats: FileServerStats = { hashes: 0, files_served: 0, chunks_served: 0, bytes_served: 0, files_received: 0, bytes_received: 0 }

  constructor(options: FileServerOptions) {
    this.roots = options.roots
    this.#o = options
    this.#logger = options.logger ?? silentLogger
  }

  stats(): FileServerStats {
    return { ...this.#stats }
  }

  /** Answers one sealed file command from minion `id`; what it returns is added to the `{ok: true}` reply. */
  async handle(id: string, cmd: FileCommand, load: Record<string, unknown>): Promise<Record<string, unknown>> {
    switch (cmd) {
      case '_file_hash':
        return this.hash(load['path'], saltenvOf(load))
      case '_serve_file':
        return this.serve(load['path'], saltenvOf(load), nonNegativeInteger(load['loc'] ?? 0, 'loc'))
      case '_file_list':
        return { files: await this.roots.list(saltenvOf(load), 'files', typeof load['prefix'] === 'string' ? load['prefix'] : '') }
      case '_dir_list':
        return { dirs: await this.roots.list(saltenvOf(load), 'dirs', typeof load['prefix'] === 'string' ? load['prefix'] : '') }
      case '_file_envs':
        return { envs: this.roots.envs() }
      case '_file_recv':
        return this.receive(id, load)
    }
  }

  /** Salt's file_hash: `{hsum, hash_type, size}` of the file, or `{}` when no root holds it. */
  async hash(path: unknown, saltenv: string): Promise<Record<string, unknown>> {
    this.#stats.hashes++
    const found = await this.roots.find(path, saltenv)
    if (found === undefined) return {}
    return { hsum: await this.#digest(found), hash_type: this.#o.hashType, size: found.size }
  }

  async #digest(found: FoundFile): Promise<string> {
    const info = await stat(found.real)
    const key = `${found.real}\0${info.size}\0${info.mtimeMs}`
    const cached = this.#hashes.get(key)
    if (cached !== undefined) return cached
    const hash = createHash(this.#o.hashType)
    for await (const chunk of createReadStream(found.real)) hash.update(chunk as Buffer)
    const digest = hash.digest('hex')
    this.#hashes.set(key, digest)
    return digest
  }

  /**
   * Salt's serve_file: `{data, dest}`, `data` the (at most file_buffer_size) bytes at `loc`; empty at the
   * end of the file. A path no root holds answers `{data: '', dest: ''}`, as Salt's does.
   */
  async serve(path: unknown, saltenv: string, loc: number): Promise<Record<string, unknown>> {
    const found = await this.roots.find(path, saltenv)
    if (found === undefined) return { data: new Uint8Array(0), dest: '' }
    const handle = await open(found.real, 'r')
    try {
      const buffer = Buffer.allocUnsafe(this.#o.bufferSize)
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, loc)
      if (loc === 0) this.#stats.files_served++
      if (bytesRead > 0) {
        this.#stats.chunks_served++
        this.#stats.bytes_served += bytesRead
      }
      return { data: buffer.subarray(0, bytesRead), dest: this.roots.check(path, saltenv) }
    } finally {
      await handle.close()
    }
  }

  /**
   * Salt's `_file_recv`: one chunk of a pushed file, `path` a list of components (the minion's absolute
   * path, or its upload_path), `loc` where the chunk goes, `size` the whole file's size. The chunks must
   * come in order; the first (loc 0) creates or empties the file.
   */
  async receive(id: string, load: Record<string, unknown>): Promise<Record<string, unknown>> {
    const parts = load['path']
    const shown = Array.isArray(parts) ? parts.join('/') : String(parts)
    if (!this.#o.recv) throw new FileRecvRefusedError(id, shown, 'file_recv is not enabled on the master')
    if (
      !Array.isArray(parts) ||
      parts.length === 0 ||
      !parts.every((part) => typeof part === 'string' && part !== '' && part !== '.' && part !== '..' && !/[/\\\0]/.test(part))
    ) {
      throw new FileRecvRefusedError(id, shown, "the path must be a non-empty list of names, none of them '.', '..' or holding '/', '\\' or NUL")
    }
    const data = load['data']
    if (!(data instanceof Uint8Array)) throw new MalformedRequestError('_file_recv load', "field 'data' must be bytes")
    const loc = nonNegativeInteger(load['loc'] ?? 0, 'loc')
    const size = nonNegativeInteger(load['size'] ?? loc + data.length, 'size')
    const limit = this.#o.recvMaxBytes
    if (size > limit || loc + data.length > limit) throw new FileRecvRefusedError(id, shown, `the file is larger than file_recv_max_size (${limit} bytes)`)
    const target = join(this.#o.cachedir, 'minions', id, 'files', ...(parts as string[]))
    await mkdir(dirname(target), { recursive: true })
    const handle = await open(target, loc === 0 ? 'w' : 'r+').catch((error: unknown) => {
      throw new FileRecvRefusedError(id, shown, `cannot open ${target}: ${(error as Error).message}`)
    })
    try {
      const current = (await handle.stat()).size
      if (loc !== current) throw new FileRecvRefusedError(id, shown, `chunk at ${loc} does not follow the ${current} bytes received`)
      await handle.write(data, 0, data.length, loc)
    } finally {
      await handle.close()
    }
    if (loc === 0) {
      this.#stats.files_received++
      this.#logger.info(`cp.push: minion ${id} sends ${shown} (${size} bytes) to ${target}`)
    }
    this.#stats.bytes_received += data.length
    return { stored: loc + data.length }
  }
}

/** Builds the file server from the master's config keys (sizes converted in @brine/config's units). */
export function fileServerFromConfig(
  opts: {
    file_roots?: Record<string, unknown>
    file_ignore_regex?: string[]
    file_ignore_glob?: string[]
    hash_type?: string
    file_recv?: boolean
    cachedir: string
  },
  limits: { bufferSize: number; recvMaxBytes: number },
  logger?: Logger,
): FileServer {
  const roots = new FileRoots({
    roots: opts.file_roots ?? { base: ['/srv/brine'] },
    ignoreRegex: opts.file_ignore_regex ?? [],
    ignoreGlob: opts.file_ignore_glob ?? [],
  })
  return new FileServer({
    roots,
    ...limits,
    hashType: opts.hash_type ?? 'sha256',
    recv: opts.file_recv === true,
    cachedir: opts.cachedir,
    ...(logger === undefined ? {} : { logger }),
  })
}

registerErrors({ FileRecvRefusedError })
