/**
 * Salt's `cp` module (salt/modules/cp.py): files from the master's file server (`salt://`), from the web
 * (`http(s)://`), the minion's cache of them, and `cp.push` back to the master. Template rendering
 * (`template=jinja`) is not built: asking for it is refused, not ignored.
 */
import { createHash, randomBytes } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { mkdir, readFile, rename, rm, stat } from 'node:fs/promises'
import { basename, dirname, isAbsolute, join } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fileServerLimitsFromConfig } from '@brine/config'
import { DEFAULT_SALTENV, isSaltUrl } from '@brine/protocol'
import { asCommandError, FileClient, hashLocalFile } from '../file-client.js'
import { CommandExecutionError, InvocationError } from '../errors.js'
import { NotAcknowledgedError } from '@brine/link'
import { fnmatch } from './args.js'
import type { JobContext, ModuleContext, ModuleDefinition } from './types.js'

const cachedirOf = (ctx: ModuleContext): string => (typeof ctx.opts['cachedir'] === 'string' ? ctx.opts['cachedir'] : '/var/cache/brine/minion')

/** The minion's file client for one job (its signal cancels a transfer). */
export function fileClientFor(ctx: ModuleContext & { signal?: AbortSignal }): FileClient {
  const opts = ctx.opts as { file_buffer_size?: number; max_frame_bytes?: number }
  return new FileClient({
    id: ctx.id,
    cachedir: cachedirOf(ctx),
    master: ctx.master,
    bufferSize: fileServerLimitsFromConfig(opts).bufferSize,
    ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
  })
}

/** The environment a call reads: its `saltenv`, else the minion's `saltenv` config, else base. */
export function saltenvOf(ctx: ModuleContext, value: unknown): string {
  if (typeof value === 'string' && value !== '') return value
  const configured = (ctx.opts as { saltenv?: unknown }).saltenv
  return typeof configured === 'string' && configured !== '' ? configured : DEFAULT_SALTENV
}

function refuseTemplate(template: unknown): void {
  if (template !== null && template !== undefined && template !== '')
    throw new InvocationError(`template rendering (template=${String(template)}) is not supported by Brine's cp module`)
}

function requireString(value: unknown, name: string): string {
  if (typeof value !== 'string' || value === '') throw new InvocationError(`${name} must be a non-empty string`)
  return value
}

const isWebUrl = (url: string): boolean => /^https?:\/\//i.test(url)
const isDir = (path: string): Promise<boolean> =>
  stat(path).then(
    (info) => info.isDirectory(),
    () => false,
  )

/** Salt's destination rule: a directory (or a path ending in '/') receives the file under its own name. */
async function destinationFor(dest: string, source: string): Promise<string> {
  return dest.endsWith('/') || (await isDir(dest)) ? join(dest, basename(source)) : dest
}

/** get_file's body: `''` when the master has no such file, false when dest's directory is missing without makedirs. */
async function getFile(ctx: JobContext, path: unknown, dest: unknown, saltenv: unknown, makedirs: unknown): Promise<string | false> {
  const url = requireString(path, 'path')
  if (!isSaltUrl(url)) throw new InvocationError(`Unsupported path: ${url} (cp.get_file reads salt:// URLs; use cp.get_url for others)`)
  const source = FileClient.resolve(url, saltenvOf(ctx, saltenv))
  const target = await destinationFor(requireString(dest, 'dest'), source.path)
  if (!(await isDir(dirname(target)))) {
    if (makedirs !== true) return false
    await mkdir(dirname(target), { recursive: true })
  }
  const fetched = await fileClientFor(ctx).fetch(source.path, source.saltenv, target)
  logTransfer(ctx, url, fetched?.transferred)
  return fetched === undefined ? '' : fetched.path
}

function logTransfer(ctx: JobContext, url: string, transferred: number | undefined): void {
  if (transferred === undefined) ctx.logger.error(`cp: ${url} was not found on the master`)
  else if (transferred === 0) ctx.logger.debug(`cp: ${url} already up to date (hash matches the master's); nothing transferred`)
  else ctx.logger.debug(`cp: ${url}: ${transferred} bytes transferred`)
}

/** cache_file's body for salt://, http(s):// and local paths; false when it cannot be had. */
async function cacheFile(ctx: JobContext, path: unknown, saltenv: unknown, sourceHash: unknown): Promise<string | false> {
  const url = requireString(path, 'path')
  if (isWebUrl(url)) return cacheWeb(ctx, url, saltenvOf(ctx, saltenv), sourceHash)
  if (!isSaltUrl(url)) {
    const local = url.startsWith('file://') ? url.slice('file://'.length) : url
    return isAbsolute(local) &&
      (await stat(local).then(
        (info) => info.isFile(),
        () => false,
      ))
      ? local
      : false
  }
  const source = FileClient.resolve(url, saltenvOf(ctx, saltenv))
  const fetched = await fileClientFor(ctx).fetch(source.path, source.saltenv)
  logTransfer(ctx, url, fetched?.transferred)
  return fetched === undefined ? false : fetched.path
}

/** Caches a salt://, http(s):// or local source for another module (cmd.script): its local path, or false. */
export function cacheFileFor(ctx: JobContext, source: string, saltenv: unknown): Promise<string | false> {
  return cacheFile(ctx, source, saltenv, null)
}

/** Where a web file is cached: `<cachedir>/extrn_files/<saltenv>/<host>/<path>`, as Salt keeps it. */
function webCachePath(ctx: JobContext, url: string, saltenv: string): string {
  const parsed = new URL(url)
  const segments = decodeURIComponent(parsed.pathname)
    .split('/')
    .filter((segment) => segment !== '' && segment !== '.' && segment !== '..')
  fileClientFor(ctx).cachePath('.', saltenv) // checks saltenv as a directory name
  return join(cachedirOf(ctx), 'extrn_files', saltenv, parsed.host.replace(/[:/\\]/g, '_'), ...(segments.length === 0 ? ['index.html'] : segments))
}

/** `source_hash` as Salt writes it: `sha256=<hex>`, or a bare hex digest (its type read from its length). */
function expectedHash(sourceHash: unknown): { type: string; hex: string } | undefined {
  if (sourceHash === null || sourceHash === undefined || sourceHash === '') return undefined
  const text = String(sourceHash).trim()
  const [type, hex] = text.includes('=')
    ? (text.split('=', 2) as [string, string])
    : [({ 32: 'md5', 40: 'sha1', 64: 'sha256', 128: 'sha512' } as Record<number, string>)[text.length] ?? 'sha256', text]
  return { type: type.toLowerCase(), hex: hex.toLowerCase() }
}

/** Downloads `url` to `target` (through a partial file), checking `source_hash` when given. */
async function download(ctx: JobContext, url: string, target: string, sourceHash: unknown): Promise<string> {
  const response = await fetch(url, { signal: ctx.signal, redirect: 'follow' })
  if (!response.ok || response.body === null)
    throw new CommandExecutionError(`HTTP error ${response.status} (${response.statusText}) fetching ${url}`, { url, status: response.status })
  await mkdir(dirname(target), { recursive: true })
  const partial = `${target}.partial-${randomBytes(4).toString('hex')}`
  try {
    await pipeline(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream), createWriteStream(partial))
    const expected = expectedHash(sourceHash)
    if (expected !== undefined) {
      const got = await hashLocalFile(partial, expected.type)
      if (got !== expected.hex) throw new CommandExecutionError(`${url}: ${expected.type} is ${got}, source_hash says ${expected.hex}`, { url })
    }
    await rename(partial, target)
    return target
  } finally {
    await rm(partial, { force: true })
  }
}

async function cacheWeb(ctx: JobContext, url: string, saltenv: string, sourceHash: unknown): Promise<string> {
  const target = webCachePath(ctx, url, saltenv)
  const expected = expectedHash(sourceHash)
  // With a source_hash, a cached copy that has it is used as it is (Salt skips the download the same way).
  if (expected !== undefined && (await hashLocalFile(target, expected.type).catch(() => '')) === expected.hex) return target
  return download(ctx, url, target, sourceHash)
}

/** get_url's body. */
async function getUrl(ctx: JobContext, path: unknown, dest: unknown, saltenv: unknown, makedirs: unknown, sourceHash: unknown): Promise<string | false> {
  const url = requireString(path, 'path')
  if (isSaltUrl(url))
    return dest === '' || dest === null || dest === undefined ? cacheFile(ctx, url, saltenv, null) : getFile(ctx, url, dest, saltenv, makedirs)
  if (!isWebUrl(url)) throw new InvocationError(`Unsupported URL scheme in ${url} (salt://, http:// and https:// are)`)
  if (dest === null) {
    const cached = await cacheWeb(ctx, url, saltenvOf(ctx, saltenv), sourceHash)
    return readFile(cached, 'utf8')
  }
  if (dest === '' || dest === undefined) return cacheWeb(ctx, url, saltenvOf(ctx, saltenv), sourceHash)
  const target = await destinationFor(String(dest), new URL(url).pathname)
  if (!(await isDir(dirname(target)))) {
    if (makedirs !== true) return false
    await mkdir(dirname(target), { recursive: true })
  }
  return download(ctx, url, target, sourceHash)
}

/** Salt's include_pat / exclude_pat: a glob, or `E@` and a regular expression, against the relative path. */
function patternMatches(pattern: unknown, path: string): boolean {
  const text = String(pattern)
  return text.startsWith('E@') ? new RegExp(text.slice(2)).test(path) : fnmatch(path, text)
}

/** get_dir / cache_dir: the master's files under `salt://dir`, each to `placeOf(file)` (undefined: its cache path). */
async function eachFileUnder(
  ctx: JobContext,
  path: unknown,
  saltenv: unknown,
  keep: (relative: string) => boolean,
  placeOf: (file: string, relative: string) => string | undefined,
): Promise<string[]> {
  const url = requireString(path, 'path')
  if (!isSaltUrl(url)) throw new InvocationError(`Unsupported path: ${url}`)
  const source = FileClient.resolve(url, saltenvOf(ctx, saltenv))
  const dir = source.path.replace(/\/+$/, '')
  const parent = dir.includes('/') ? dir.slice(0, dir.lastIndexOf('/')) : ''
  const client = fileClientFor(ctx)
  const out: string[] = []
  for (const file of await client.list('files', source.saltenv, `${dir}/`)) {
    const relative = file.slice(parent === '' ? 0 : parent.length + 1)
    // The master lists only what its roots hold; a name that would climb out of dest is skipped all the same.
    if (!file.startsWith(`${dir}/`) || relative.split('/').includes('..') || !keep(relative)) continue
    const fetched = await client.fetch(file, source.saltenv, placeOf(file, relative))
    if (fetched !== undefined) out.push(fetched.path)
  }
  return out
}

/** cp.push's body: true once the master stored the file, false (logged) when it is refused or unreadable. */
async function push(ctx: JobContext, path: unknown, uploadPath: unknown, removeSource: unknown): Promise<boolean> {
  const source = requireString(path, 'path')
  if (!isAbsolute(source)) {
    ctx.logger.error(`cp.push: path must be absolute, got ${source}`)
    return false
  }
  if (
    !(await stat(source).then(
      (info) => info.isFile(),
      () => false,
    ))
  ) {
    ctx.logger.error(`cp.push: ${source} is not a file`)
    return false
  }
  const parts = (typeof uploadPath === 'string' && uploadPath !== '' ? uploadPath : source).split('/').filter((part) => part !== '' && part !== '.')
  if (parts.includes('..')) {
    ctx.logger.error(`cp.push: the upload path ${String(uploadPath ?? source)} climbs out with '..'`)
    return false
  }
  try {
    await fileClientFor(ctx).push(source, parts)
  } catch (error) {
    if (!(error instanceof NotAcknowledgedError || error instanceof CommandExecutionError)) throw error
    ctx.logger.error(`cp.push of ${source} refused by the master: ${error.message}`)
    return false
  }
  if (removeSource === true) await rm(source, { force: true })
  return true
}

const doc = (text: string, example: string): string => `${text}\n\nCLI Example:\n\n    brine '*' ${example}`

/** Each function's refusals from the file server reach the return as `ERROR: FileServerPathError: …`. */
function reportingRefusals(definition: ModuleDefinition): ModuleDefinition {
  return Object.fromEntries(
    Object.entries(definition).map(([name, spec]) => [
      name,
      {
        ...spec,
        run: (args: unknown[], kwargs: Record<string, unknown>, ctx: JobContext) =>
          spec.run(args, kwargs, ctx).catch((error: unknown) => {
            throw asCommandError(error)
          }),
      },
    ]),
  )
}

export const cpModule: ModuleDefinition = reportingRefusals({
  get_file: {
    doc: doc(
      "Copy a file from the master's file server to the minion: 'salt://path[?saltenv=env]' to dest (a directory keeps the file's name). Returns dest, '' when the master has no such file, False when dest's directory is missing and makedirs is False. Nothing is transferred when dest already has the master's hash. template= is not supported.",
      'cp.get_file salt://vimrc /etc/vimrc',
    ),
    args: ['path', 'dest', 'saltenv', 'makedirs', 'template', 'gzip'],
    defaults: { saltenv: null, makedirs: false, template: null, gzip: null },
    kwargs: true,
    run: async ([path, dest, saltenv, makedirs, template], _kwargs, ctx) => {
      refuseTemplate(template)
      return getFile(ctx, path, dest, saltenv, makedirs)
    },
  },
  get_dir: {
    doc: doc(
      "Copy a directory of the master's file server, recursively, into dest (salt://a/b lands in dest/b). Returns the files written.",
      'cp.get_dir salt://path/to/dir/ /minion/dest',
    ),
    args: ['path', 'dest', 'saltenv', 'template', 'gzip'],
    defaults: { saltenv: null, template: null, gzip: null },
    kwargs: true,
    run: async ([path, dest, saltenv, template], _kwargs, ctx) => {
      refuseTemplate(template)
      const root = requireString(dest, 'dest')
      return eachFileUnder(
        ctx,
        path,
        saltenv,
        () => true,
        (_file, relative) => join(root, ...relative.split('/')),
      )
    },
  },
  get_url: {
    doc: doc(
      "Fetch salt://, http:// or https:// URLs. dest '' (default) caches the file and returns its path; dest None returns the contents; else the file is written to dest. source_hash ('sha256=<hex>') is checked for web files.",
      'cp.get_url https://example.com/file.txt /tmp/file.txt',
    ),
    args: ['path', 'dest', 'saltenv', 'makedirs', 'source_hash'],
    defaults: { dest: '', saltenv: null, makedirs: false, source_hash: null },
    kwargs: true,
    run: async ([path, dest, saltenv, makedirs, sourceHash], _kwargs, ctx) => getUrl(ctx, path, dest, saltenv, makedirs, sourceHash),
  },
  get_file_str: {
    doc: doc(
      'Download a file from a URL to the minion cache and return its contents as a string (False when it cannot be had).',
      'cp.get_file_str salt://my/file',
    ),
    args: ['path', 'saltenv'],
    defaults: { saltenv: null },
    run: async ([path, saltenv], _kwargs, ctx) => {
      const cached = await cacheFile(ctx, path, saltenv, null)
      return cached === false ? false : readFile(cached, 'utf8')
    },
  },
  cache_file: {
    doc: doc(
      "Cache a file (salt://, http(s)://) in the minion's cache (<cachedir>/files/<saltenv>/…, web files under extrn_files) and return its local path, or False.",
      'cp.cache_file salt://path/to/file',
    ),
    args: ['path', 'saltenv', 'source_hash', 'verify_ssl', 'use_etag'],
    defaults: { saltenv: null, source_hash: null, verify_ssl: true, use_etag: false },
    kwargs: true,
    run: async ([path, saltenv, sourceHash], _kwargs, ctx) => cacheFile(ctx, path, saltenv, sourceHash),
  },
  cache_files: {
    doc: doc(
      'Cache each of a list of files; returns their local paths (False for one that cannot be had).',
      'cp.cache_files salt://pathto/file1,salt://pathto/file1',
    ),
    args: ['paths', 'saltenv'],
    defaults: { saltenv: null },
    kwargs: true,
    run: async ([paths, saltenv], _kwargs, ctx) => {
      const list = typeof paths === 'string' ? paths.split(',') : Array.isArray(paths) ? paths : []
      const out: Array<string | false> = []
      for (const path of list) out.push(await cacheFile(ctx, path, saltenv, null))
      return out
    },
  },
  cache_dir: {
    doc: doc(
      'Download and cache everything under a salt:// directory; include_pat / exclude_pat (globs, or E@regex) filter the relative paths. Returns the cached paths.',
      'cp.cache_dir salt://path/to/dir include_pat="E@*.conf$"',
    ),
    args: ['path', 'saltenv', 'include_empty', 'include_pat', 'exclude_pat'],
    defaults: { saltenv: null, include_empty: false, include_pat: null, exclude_pat: null },
    kwargs: true,
    run: async ([path, saltenv, _includeEmpty, include, exclude], _kwargs, ctx) =>
      eachFileUnder(
        ctx,
        path,
        saltenv,
        (relative) =>
          (include === null || include === undefined || patternMatches(include, relative)) &&
          !(exclude !== null && exclude !== undefined && patternMatches(exclude, relative)),
        () => undefined,
      ),
  },
  cache_master: {
    doc: doc("Cache every file of an environment of the master's file server; returns the cached paths.", 'cp.cache_master'),
    args: ['saltenv'],
    defaults: { saltenv: null },
    run: async ([saltenv], _kwargs, ctx) => {
      const env = saltenvOf(ctx, saltenv)
      const client = fileClientFor(ctx)
      const out: string[] = []
      for (const file of await client.list('files', env)) {
        const fetched = await client.fetch(file, env)
        if (fetched !== undefined) out.push(fetched.path)
      }
      return out
    },
  },
  list_master: {
    doc: doc("List the files of an environment of the master's file server (those starting with prefix).", 'cp.list_master'),
    args: ['saltenv', 'prefix'],
    defaults: { saltenv: null, prefix: '' },
    run: async ([saltenv, prefix], _kwargs, ctx) => fileClientFor(ctx).list('files', saltenvOf(ctx, saltenv), String(prefix ?? '')),
  },
  list_master_dirs: {
    doc: doc("List the directories of an environment of the master's file server (those starting with prefix).", 'cp.list_master_dirs'),
    args: ['saltenv', 'prefix'],
    defaults: { saltenv: null, prefix: '' },
    run: async ([saltenv, prefix], _kwargs, ctx) => fileClientFor(ctx).list('dirs', saltenvOf(ctx, saltenv), String(prefix ?? '')),
  },
  list_minion: {
    doc: doc('List the files of an environment cached on this minion.', 'cp.list_minion'),
    args: ['saltenv'],
    defaults: { saltenv: null },
    run: async ([saltenv], _kwargs, ctx) => fileClientFor(ctx).listCached(saltenvOf(ctx, saltenv)),
  },
  envs: {
    doc: doc("List the environments of the master's file server.", 'cp.envs'),
    run: async (_args, _kwargs, ctx) => fileClientFor(ctx).envs(),
  },
  is_cached: {
    doc: doc("Return the local path of a cached file (salt:// or http(s)://), or '' when it is not cached.", 'cp.is_cached salt://path/to/file'),
    args: ['path', 'saltenv'],
    defaults: { saltenv: null },
    run: async ([path, saltenv], _kwargs, ctx) => {
      const url = requireString(path, 'path')
      const env = saltenvOf(ctx, saltenv)
      let local: string
      if (isWebUrl(url)) local = webCachePath(ctx, url, env)
      else if (isSaltUrl(url)) {
        const source = FileClient.resolve(url, env)
        local = fileClientFor(ctx).cachePath(source.path, source.saltenv)
      } else return ''
      return (await stat(local).then(
        (info) => info.isFile(),
        () => false,
      ))
        ? local
        : ''
    },
  },
  hash_file: {
    doc: doc(
      "Return {hash_type, hsum} of a file on the master's file server (salt://) or on the minion (a local path); {} when it does not exist.",
      'cp.hash_file salt://path/to/file',
    ),
    args: ['path', 'saltenv'],
    defaults: { saltenv: null },
    run: async ([path, saltenv], _kwargs, ctx) => {
      const url = requireString(path, 'path')
      if (isSaltUrl(url)) {
        const source = FileClient.resolve(url, saltenvOf(ctx, saltenv))
        const remote = await fileClientFor(ctx).hash(source.path, source.saltenv)
        return remote === undefined ? {} : { hash_type: remote.hash_type, hsum: remote.hsum }
      }
      const hashType = typeof ctx.opts['hash_type'] === 'string' ? ctx.opts['hash_type'] : 'sha256'
      createHash(hashType) // an unknown hash_type fails here, naming it
      return (await stat(url).then(
        (info) => info.isFile(),
        () => false,
      ))
        ? { hash_type: hashType, hsum: await hashLocalFile(url, hashType) }
        : {}
    },
  },
  push: {
    doc: doc(
      'Push a file from the minion up to the master, stored under <master cachedir>/minions/<id>/files/<path> (or upload_path). The master must have file_recv: True and takes at most file_recv_max_size MiB. Returns True, or False (logged) when refused.',
      'cp.push /etc/fstab',
    ),
    args: ['path', 'keep_symlinks', 'upload_path', 'remove_source'],
    defaults: { keep_symlinks: false, upload_path: null, remove_source: false },
    run: async ([path, _keepSymlinks, uploadPath, removeSource], _kwargs, ctx) => push(ctx, path, uploadPath, removeSource),
  },
})
