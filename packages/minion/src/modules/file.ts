/**
 * Salt's `file` execution module (salt/modules/file.py), the everyday part: read and write text,
 * edit by regex, make, copy, move and remove paths, and read or set their metadata. Paths must be
 * absolute, as in Salt; what a function returns is Salt's shape.
 */
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { chmod, chown, cp, lstat, mkdir, readFile, readlink, realpath, rename, rm, stat, symlink, utimes, writeFile, open } from 'node:fs/promises'
import type { Stats } from 'node:fs'
import { dirname } from 'node:path'
import { secondsFromMs } from '@brine/config'
import { translatePythonRegex } from '@brine/targeting'
import { CommandExecutionError, InvocationError } from '../errors.js'
import { DEFAULT_MAX_OUTPUT_BYTES } from './cmd.js'
import { findFiles } from './file-find.js'
import type { JobContext, ModuleDefinition } from './types.js'
import { badArgument, execArgv, isSet, requirePath, requireString, toBool, toInteger, toMode } from './validate.js'

const HASH_TYPES = ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512'] as const

/** `file.write`/`append`/`prepend` take lines as *args, or `args=[…]` as Salt's states call them. */
function linesOf(args: readonly unknown[], kwargs: Record<string, unknown>): string[] {
  const given = isSet(kwargs.args) ? (Array.isArray(kwargs.args) ? kwargs.args : [kwargs.args]) : args
  return given.map((line) => (typeof line === 'string' ? line : JSON.stringify(line)))
}

async function exists(path: string): Promise<Stats | undefined> {
  return await lstat(path).catch(() => undefined)
}

/** Python's re flags, as an int (re.I = 2, re.M = 8, re.S = 16) or a list of names, as a JS inline prefix. */
function flagsPrefix(flags: unknown): string {
  const names: Record<string, string> = { IGNORECASE: 'i', I: 'i', MULTILINE: 'm', M: 'm', DOTALL: 's', S: 's' }
  if (typeof flags === 'number' || (typeof flags === 'string' && /^\d+$/.test(flags))) {
    const bits = Number(flags)
    if (bits & ~(2 | 8 | 16)) throw badArgument('flags', 'a sum of re.IGNORECASE (2), re.MULTILINE (8) and re.DOTALL (16), or their names', flags)
    return `${bits & 2 ? 'i' : ''}${bits & 8 ? 'm' : ''}${bits & 16 ? 's' : ''}`
  }
  const list = typeof flags === 'string' ? flags.split(',') : flags
  if (!Array.isArray(list)) throw badArgument('flags', 'an int or a list of re flag names', flags)
  return list
    .map((name) => {
      const letter = names[String(name).trim().toUpperCase()]
      if (letter === undefined) throw badArgument('flags', 'IGNORECASE, MULTILINE or DOTALL', name)
      return letter
    })
    .join('')
}

/** A Python pattern (with Salt's `flags`) as a global JS RegExp; a bad pattern names `pattern`. */
function compile(pattern: unknown, flags: unknown): RegExp {
  const text = requireString(pattern, 'pattern')
  const prefix = flagsPrefix(flags)
  try {
    const translated = translatePythonRegex(prefix === '' ? text : `(?${prefix})${text}`)
    return new RegExp(translated.source, `${translated.flags}g`)
  } catch (error) {
    throw new InvocationError(`pattern is not a valid regular expression: ${(error as Error).message}`, { argument: 'pattern' })
  }
}

/** Python's replacement template (`\1`, `\g<1>`, `\g<name>`, `\n`, `\t`, `\\`) applied to one match. */
function pythonReplacer(repl: string): (match: RegExpMatchArray) => string {
  return (match) =>
    repl.replace(/\\(g<(\w+)>|\d{1,2}|n|t|\\)/g, (_all, what: string, name: string | undefined) => {
      if (name !== undefined) return (/^\d+$/.test(name) ? match[Number(name)] : match.groups?.[name]) ?? ''
      if (what === 'n') return '\n'
      if (what === 't') return '\t'
      if (what === '\\') return '\\'
      return match[Number(what)] ?? ''
    })
}

/** Replaces up to `limit` matches (0: all); returns the new text and how many were replaced. */
function replaceMatches(text: string, regex: RegExp, replacer: (match: RegExpMatchArray) => string, limit: number): { text: string; count: number } {
  let out = ''
  let last = 0
  let count = 0
  for (const match of text.matchAll(regex)) {
    if (limit !== 0 && count >= limit) break
    const index = match.index ?? 0
    out += text.slice(last, index) + replacer(match)
    last = index + match[0].length
    count++
  }
  return { text: out + text.slice(last), count }
}

/** Salt's show_changes diff: `diff -u` of the old and new text, without the file headers' dates. */
async function unifiedDiff(ctx: JobContext, path: string, before: string, after: string): Promise<string> {
  const stem = `${path}.brine-diff-${process.pid}`
  await writeFile(`${stem}.old`, before, { mode: 0o600 })
  await writeFile(`${stem}.new`, after, { mode: 0o600 })
  try {
    const result = await execArgv(ctx, ['diff', '-u', '--label', path, '--label', path, `${stem}.old`, `${stem}.new`])
    return (
      result.stdout
        .split('\n')
        .map((line) => (line.startsWith('--- ') ? '---' : line.startsWith('+++ ') ? '+++' : line))
        .join('\n') + '\n'
    )
  } finally {
    await rm(`${stem}.old`, { force: true })
    await rm(`${stem}.new`, { force: true })
  }
}

async function readCapped(path: string): Promise<string> {
  const handle = await open(path, 'r')
  try {
    const size = (await handle.stat()).size
    const limit = Math.min(size, DEFAULT_MAX_OUTPUT_BYTES)
    const buffer = Buffer.alloc(limit)
    const { bytesRead } = await handle.read(buffer, 0, limit, 0)
    const text = buffer.subarray(0, bytesRead).toString('utf8')
    return size > DEFAULT_MAX_OUTPUT_BYTES ? `${text}\n[brine: output truncated at ${DEFAULT_MAX_OUTPUT_BYTES} bytes]` : text
  } finally {
    await handle.close()
  }
}

async function hashFile(path: string, form: string): Promise<string> {
  if (!(HASH_TYPES as readonly string[]).includes(form)) throw badArgument('form', `one of ${HASH_TYPES.join(', ')}`, form)
  const hash = createHash(form)
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

/** Salt's file_hash argument: `type=hex`, `type:hex`, or bare hex typed by its length. */
function parseHash(value: unknown): { form: string; digest: string } {
  const text = requireString(value, 'file_hash').trim().toLowerCase()
  const split = /^(\w+)[=:]([0-9a-f]+)$/.exec(text)
  if (split !== null) return { form: split[1] as string, digest: split[2] as string }
  const byLength: Record<number, string> = { 32: 'md5', 40: 'sha1', 56: 'sha224', 64: 'sha256', 96: 'sha384', 128: 'sha512' }
  const form = /^[0-9a-f]+$/.test(text) ? byLength[text.length] : undefined
  if (form === undefined) throw badArgument('file_hash', "'<type>=<hex digest>' or a bare md5/sha1/sha2 hex digest", value)
  return { form, digest: text }
}

function typeOf(stats: Stats): string {
  if (stats.isSymbolicLink()) return 'link'
  if (stats.isDirectory()) return 'dir'
  if (stats.isCharacterDevice()) return 'char'
  if (stats.isBlockDevice()) return 'block'
  if (stats.isFIFO()) return 'pipe'
  if (stats.isSocket()) return 'socket'
  return 'file'
}

const modeString = (mode: number): string => `0${(mode & 0o7777).toString(8).padStart(3, '0')}`

/** user/group names of numeric ids, from getent (empty → the number, as Salt shows an unknown id). */
async function nameOf(ctx: JobContext, database: 'passwd' | 'group', id: number): Promise<string | number> {
  const result = await execArgv(ctx, ['getent', database, String(id)], { timeout: 10 }).catch(() => undefined)
  const name = result?.retcode === 0 ? result.stdout.split(':')[0] : undefined
  return name === undefined || name === '' ? id : name
}

async function stats(ctx: JobContext, path: string, hashType: unknown, follow: boolean): Promise<Record<string, unknown>> {
  const info = await (follow ? stat(path) : lstat(path)).catch(() => undefined)
  if (info === undefined) throw new CommandExecutionError(`Path not found: ${path}`, { path })
  const result: Record<string, unknown> = {
    inode: info.ino,
    uid: info.uid,
    gid: info.gid,
    user: await nameOf(ctx, 'passwd', info.uid),
    group: await nameOf(ctx, 'group', info.gid),
    atime: secondsFromMs(info.atimeMs),
    mtime: secondsFromMs(info.mtimeMs),
    ctime: secondsFromMs(info.ctimeMs),
    size: info.size,
    mode: modeString(info.mode),
    type: typeOf(info),
    target: await realpath(path).catch(() => path),
  }
  if (isSet(hashType) && info.isFile()) result.sum = await hashFile(path, String(hashType))
  return result
}

/** An id for chown: a number, or a name resolved with getent (unknown: a typed error naming the argument). */
async function idOf(ctx: JobContext, database: 'passwd' | 'group', value: unknown, name: string): Promise<number> {
  if (!isSet(value) || value === '') return -1
  const text = requireString(value, name)
  if (/^\d+$/.test(text)) return Number(text)
  const result = await execArgv(ctx, ['getent', database, text], { timeout: 10 })
  const id = result.retcode === 0 ? Number(result.stdout.split(':')[2]) : Number.NaN
  if (!Number.isInteger(id)) throw new InvocationError(`${name} ${JSON.stringify(text)} does not exist`, { argument: name })
  return id
}

async function replace(ctx: JobContext, args: unknown[]): Promise<unknown> {
  const [
    pathArg,
    pattern,
    repl,
    count,
    flags,
    ,
    appendIfNotFound,
    prependIfNotFound,
    notFoundContent,
    backup,
    dryRun,
    searchOnly,
    showChanges,
    ignoreIfMissing,
  ] = args
  const path = requirePath(pathArg, 'path')
  const regex = compile(pattern, flags)
  const limit = toInteger(count, 'count', 0)
  const [append, prepend, dry, searching, show] = [
    toBool(appendIfNotFound, 'append_if_not_found'),
    toBool(prependIfNotFound, 'prepend_if_not_found'),
    toBool(dryRun, 'dry_run'),
    toBool(searchOnly, 'search_only'),
    toBool(showChanges, 'show_changes'),
  ]
  const info = await exists(path)
  if (info === undefined || !info.isFile()) {
    if (toBool(ignoreIfMissing, 'ignore_if_missing')) return false
    throw new CommandExecutionError(`File not found: ${path}`, { path })
  }
  const before = await readFile(path, 'utf8')
  const replaced = replaceMatches(before, regex, pythonReplacer(typeof repl === 'string' ? repl : String(repl)), limit)
  const seen = replaced.count
  let after = replaced.text
  if (searching) return seen > 0
  if (seen === 0 && (append || prepend)) {
    const content = typeof notFoundContent === 'string' ? notFoundContent : typeof repl === 'string' ? repl : String(repl)
    if (!before.includes(content)) {
      after = append ? `${before}${before === '' || before.endsWith('\n') ? '' : '\n'}${content}\n` : `${content}\n${before}`
    }
  }
  const changed = after !== before
  if (changed && !dry) {
    if (typeof backup === 'string' && backup !== '') await writeFile(`${path}${backup}`, before, { mode: info.mode & 0o7777 })
    await writeFile(path, after)
  }
  if (!show) return changed
  return changed ? await unifiedDiff(ctx, path, before, after) : ''
}

async function search(args: unknown[]): Promise<boolean> {
  const [pathArg, pattern, flags, , ignoreIfMissing, multiline] = args
  const path = requirePath(pathArg, 'path')
  const extra = toBool(multiline, 'multiline') ? 16 : 0
  const regex = compile(pattern, typeof flags === 'number' ? flags | extra : flags)
  if ((await exists(path))?.isFile() !== true) {
    if (toBool(ignoreIfMissing, 'ignore_if_missing')) return false
    throw new CommandExecutionError(`File not found: ${path}`, { path })
  }
  return regex.test(await readFile(path, 'utf8'))
}

const PATH_DOC = '\n\npath\n    Absolute path of the file.'

const FILE_FUNCTIONS = {
  read: {
    doc: "Return the content of the file (text; ``binary=True`` is refused: JSON cannot carry bytes). Output past 64 MiB is cut with a marker, as cmd.run's.\n\nCLI Example:\n\n    brine '*' file.read /path/to/file",
    args: ['path', 'binary'],
    defaults: { binary: false },
    run: async ([pathArg, binary]) => {
      const path = requirePath(pathArg, 'path')
      if (toBool(binary, 'binary')) throw new InvocationError('binary=True is not supported: returns travel as text', { argument: 'binary' })
      if ((await exists(path)) === undefined) throw new CommandExecutionError(`File not found: ${path}`, { path })
      return await readCapped(path)
    },
  },
  write: {
    doc: 'Write text to a file, overwriting what it held: each argument is one line.\n\nReturns ``Wrote N lines to "path"``.\n\nCLI Example:\n\n    brine \'*\' file.write /etc/motd "With all thine offerings thou shalt offer salt."',
    args: ['path'],
    varargs: true,
    kwargs: true,
    run: async ([pathArg, ...rest], kwargs) => {
      const path = requirePath(pathArg, 'path')
      const lines = linesOf(rest, kwargs)
      await writeFile(path, lines.map((line) => `${line}\n`).join(''))
      return `Wrote ${lines.length} lines to "${path}"`
    },
  },
  append: {
    doc: 'Append text to the end of a file (a newline is added first if the file does not end with one): each argument is one line.\n\nReturns ``Wrote N lines to "path"``.\n\nCLI Example:\n\n    brine \'*\' file.append /etc/motd "With all thine offerings thou shalt offer salt." "Salt is what makes bad things taste good."',
    args: ['path'],
    varargs: true,
    kwargs: true,
    run: async ([pathArg, ...rest], kwargs) => {
      const path = requirePath(pathArg, 'path')
      const lines = linesOf(rest, kwargs)
      const before = (await exists(path)) === undefined ? '' : await readFile(path, 'utf8')
      const gap = before === '' || before.endsWith('\n') ? '' : '\n'
      await writeFile(path, `${gap}${lines.map((line) => `${line}\n`).join('')}`, { flag: 'a' })
      return `Wrote ${lines.length} lines to "${path}"`
    },
  },
  prepend: {
    doc: 'Prepend text to the beginning of a file: each argument is one line.\n\nReturns ``Prepended N lines to "path"``.\n\nCLI Example:\n\n    brine \'*\' file.prepend /etc/motd "With all thine offerings thou shalt offer salt."',
    args: ['path'],
    varargs: true,
    kwargs: true,
    run: async ([pathArg, ...rest], kwargs) => {
      const path = requirePath(pathArg, 'path')
      const lines = linesOf(rest, kwargs)
      const before = (await exists(path)) === undefined ? '' : await readFile(path, 'utf8')
      await writeFile(path, `${lines.map((line) => `${line}\n`).join('')}${before}`)
      return `Prepended ${lines.length} lines to "${path}"`
    },
  },
  replace: {
    doc: "Replace occurrences of a pattern (Python ``re`` syntax) in a file. Returns a diff of the change (``''`` when nothing changed), or a bool when ``show_changes=False``; with ``search_only=True``, whether the pattern occurs. A backup is kept as ``<path><backup>`` (default ``.bak``, ``backup=False`` for none).\n\npattern\n    Python regular expression.\nrepl\n    Replacement; ``\\1`` and ``\\g<name>`` refer to groups.\ncount\n    Most replacements (0: all).\nflags\n    Python re flags as an int (default 8, MULTILINE) or names (IGNORECASE, MULTILINE, DOTALL).\nappend_if_not_found / prepend_if_not_found\n    Add ``not_found_content`` (default ``repl``) when the pattern is absent.\ndry_run\n    Report without writing.\nignore_if_missing\n    Return False for a missing file instead of failing.\n\nCLI Example:\n\n    brine '*' file.replace /etc/httpd/httpd.conf pattern='LogLevel warn' repl='LogLevel info'",
    args: [
      'path',
      'pattern',
      'repl',
      'count',
      'flags',
      'bufsize',
      'append_if_not_found',
      'prepend_if_not_found',
      'not_found_content',
      'backup',
      'dry_run',
      'search_only',
      'show_changes',
      'ignore_if_missing',
      'preserve_inode',
      'backslash_literal',
    ],
    defaults: {
      count: 0,
      flags: 8,
      bufsize: 1,
      append_if_not_found: false,
      prepend_if_not_found: false,
      not_found_content: null,
      backup: '.bak',
      dry_run: false,
      search_only: false,
      show_changes: true,
      ignore_if_missing: false,
      preserve_inode: true,
      backslash_literal: false,
    },
    run: async (args, _kwargs, ctx) => await replace(ctx, args),
  },
  search: {
    doc: "Search for occurrences of a pattern (Python ``re`` syntax) in a file. Returns True or False.\n\nCLI Example:\n\n    brine '*' file.search /etc/crontab 'mymaintenance.sh'",
    args: ['path', 'pattern', 'flags', 'bufsize', 'ignore_if_missing', 'multiline'],
    defaults: { flags: 8, bufsize: 1, ignore_if_missing: false, multiline: false },
    run: async (args) => await search(args),
  },
  touch: {
    doc: "Create a file if it does not exist, or update its access and modification times (atime, mtime: seconds since the epoch).\n\nCLI Example:\n\n    brine '*' file.touch /var/log/emptyfile",
    args: ['name', 'atime', 'mtime'],
    defaults: { atime: null, mtime: null },
    run: async ([nameArg, atime, mtime]) => {
      const path = requirePath(nameArg, 'name')
      const now = secondsFromMs(Date.now())
      const a = isSet(atime) ? toInteger(atime, 'atime', 0) : now
      const m = isSet(mtime) ? toInteger(mtime, 'mtime', 0) : now
      try {
        await writeFile(path, '', { flag: 'a' })
        await utimes(path, a, m)
      } catch (error) {
        throw new CommandExecutionError(`Could not touch ${path}: ${(error as Error).message}`, { path })
      }
      return true
    },
  },
  mkdir: {
    doc: "Ensure a directory exists, with its parents; optionally set its owner and mode.\n\nCLI Example:\n\n    brine '*' file.mkdir /opt/jetty/context user=root mode=0755",
    args: ['dir_path', 'user', 'group', 'mode'],
    defaults: { user: null, group: null, mode: null },
    run: async ([dirArg, user, group, mode], _kwargs, ctx) => {
      const path = requirePath(dirArg, 'dir_path')
      const bits = isSet(mode) ? toMode(mode, 'mode') : undefined
      const uid = await idOf(ctx, 'passwd', user, 'user')
      const gid = await idOf(ctx, 'group', group, 'group')
      await mkdir(path, { recursive: true })
      if (bits !== undefined) await chmod(path, bits)
      if (uid !== -1 || gid !== -1) await chown(path, uid, gid)
      return true
    },
  },
  remove: {
    doc: "Remove a file or a directory tree. Returns True when something was removed, False when nothing was there.\n\nCLI Example:\n\n    brine '*' file.remove /tmp/foo",
    args: ['path'],
    kwargs: true,
    run: async ([pathArg]) => {
      const path = requirePath(pathArg, 'path')
      if (path === '/') throw new InvocationError('path must not be /', { argument: 'path' })
      if ((await exists(path)) === undefined) return false
      try {
        await rm(path, { recursive: true, force: true })
      } catch (error) {
        throw new CommandExecutionError(`Could not remove '${path}': ${(error as Error).message}`, { path })
      }
      return true
    },
  },
  copy: {
    doc: "Copy a file or directory from src to dst (a directory needs ``recurse=True``; ``remove_existing=True`` empties dst first).\n\nCLI Example:\n\n    brine '*' file.copy /path/to/src /path/to/dst\n    brine '*' file.copy /path/to/src_dir /path/to/dst_dir recurse=True",
    args: ['src', 'dst', 'recurse', 'remove_existing'],
    defaults: { recurse: false, remove_existing: false },
    run: async ([srcArg, dstArg, recurse, removeExisting]) => {
      const src = requirePath(srcArg, 'src')
      const dst = requirePath(dstArg, 'dst')
      const info = await exists(src)
      if (info === undefined) throw new CommandExecutionError(`Source file '${src}' does not exist`, { path: src })
      const recursive = toBool(recurse, 'recurse')
      if (info.isDirectory() && !recursive) throw new InvocationError(`src '${src}' is a directory: copy it with recurse=True`, { argument: 'recurse' })
      if (toBool(removeExisting, 'remove_existing')) await rm(dst, { recursive: true, force: true })
      try {
        await cp(src, dst, { recursive, force: true, preserveTimestamps: true, verbatimSymlinks: true })
      } catch (error) {
        throw new CommandExecutionError(`Could not copy '${src}' to '${dst}': ${(error as Error).message}`, { path: src })
      }
      return true
    },
  },
  rename: {
    doc: "Rename (move) a file or directory.\n\nCLI Example:\n\n    brine '*' file.rename /path/to/src /path/to/dst",
    args: ['src', 'dst'],
    run: async ([srcArg, dstArg]) => {
      const src = requirePath(srcArg, 'src')
      const dst = requirePath(dstArg, 'dst')
      if ((await exists(src)) === undefined) throw new CommandExecutionError(`File '${src}' does not exist`, { path: src })
      try {
        await rename(src, dst)
      } catch (error) {
        throw new CommandExecutionError(`Could not move '${src}' to '${dst}': ${(error as Error).message}`, { path: src })
      }
      return true
    },
  },
  stats: {
    doc: "Return a dict of a path's metadata: inode, uid, gid, user, group, atime, mtime, ctime, size, mode, type, target (and sum with hash_type).\n\nCLI Example:\n\n    brine '*' file.stats /etc/passwd",
    args: ['path', 'hash_type', 'follow_symlinks'],
    defaults: { hash_type: null, follow_symlinks: true },
    run: async ([pathArg, hashType, follow], _kwargs, ctx) => await stats(ctx, requirePath(pathArg, 'path'), hashType, toBool(follow, 'follow_symlinks')),
  },
  lstat: {
    doc: "Return the dict of a path's lstat fields: st_atime, st_ctime, st_gid, st_mode, st_mtime, st_nlink, st_size, st_uid.\n\nCLI Example:\n\n    brine '*' file.lstat /path/to/file",
    args: ['path'],
    run: async ([pathArg]) => {
      const path = requirePath(pathArg, 'path')
      const info = await lstat(path).catch(() => undefined)
      if (info === undefined) throw new CommandExecutionError(`Path not found: ${path}`, { path })
      return {
        st_atime: secondsFromMs(info.atimeMs),
        st_ctime: secondsFromMs(info.ctimeMs),
        st_gid: info.gid,
        st_mode: info.mode,
        st_mtime: secondsFromMs(info.mtimeMs),
        st_nlink: info.nlink,
        st_size: info.size,
        st_uid: info.uid,
      }
    },
  },
  file_exists: {
    doc: "Return True if the path is a file (following symlinks).\n\nCLI Example:\n\n    brine '*' file.file_exists /etc/passwd" + PATH_DOC,
    args: ['path'],
    run: async ([pathArg]) => (await stat(requirePath(pathArg, 'path')).catch(() => undefined))?.isFile() === true,
  },
  directory_exists: {
    doc: "Return True if the path is a directory (following symlinks).\n\nCLI Example:\n\n    brine '*' file.directory_exists /etc",
    args: ['path'],
    run: async ([pathArg]) => (await stat(requirePath(pathArg, 'path')).catch(() => undefined))?.isDirectory() === true,
  },
  get_hash: {
    doc: "Return the hex digest of a file (form: md5, sha1, sha224, sha256 (default), sha384, sha512).\n\nCLI Example:\n\n    brine '*' file.get_hash /etc/shadow",
    args: ['path', 'form', 'chunk_size'],
    defaults: { form: 'sha256', chunk_size: 65536 },
    run: async ([pathArg, form]) => {
      const path = requirePath(pathArg, 'path')
      if ((await stat(path).catch(() => undefined))?.isFile() !== true) throw new CommandExecutionError(`File not found: ${path}`, { path })
      return await hashFile(path, String(form))
    },
  },
  check_hash: {
    doc: "Check a file against a hash: ``<type>=<hex>``, ``<type>:<hex>`` or a bare hex digest (type from its length). Returns True or False.\n\nCLI Example:\n\n    brine '*' file.check_hash /etc/fstab e138491e9d5b97023cea823fe17bac22",
    args: ['path', 'file_hash'],
    run: async ([pathArg, fileHash]) => {
      const path = requirePath(pathArg, 'path')
      const { form, digest } = parseHash(fileHash)
      if ((await stat(path).catch(() => undefined))?.isFile() !== true) return false
      return (await hashFile(path, form)) === digest
    },
  },
  chown: {
    doc: "Change the owner (user) and group of a path (names or ids; an empty one is left as it is). Returns None.\n\nCLI Example:\n\n    brine '*' file.chown /etc/passwd root root",
    args: ['path', 'user', 'group'],
    run: async ([pathArg, user, group], _kwargs, ctx) => {
      const path = requirePath(pathArg, 'path')
      const uid = await idOf(ctx, 'passwd', user, 'user')
      const gid = await idOf(ctx, 'group', group, 'group')
      if ((await exists(path)) === undefined) throw new CommandExecutionError(`File not found: ${path}`, { path })
      await chown(path, uid, gid)
      return null
    },
  },
  set_mode: {
    doc: "Set the mode of a file or directory; returns the new mode as get_mode shows it.\n\nCLI Example:\n\n    brine '*' file.set_mode /etc/passwd 0644",
    args: ['path', 'mode'],
    run: async ([pathArg, mode]) => {
      const path = requirePath(pathArg, 'path')
      const bits = toMode(mode, 'mode')
      if ((await exists(path)) === undefined) throw new CommandExecutionError(`File not found: ${path}`, { path })
      await chmod(path, bits)
      return modeString((await stat(path)).mode)
    },
  },
  get_mode: {
    doc: "Return the mode of a file, e.g. ``0644`` (``''`` when it does not exist).\n\nCLI Example:\n\n    brine '*' file.get_mode /etc/passwd",
    args: ['path', 'follow_symlinks'],
    defaults: { follow_symlinks: true },
    run: async ([pathArg, follow]) => {
      const path = requirePath(pathArg, 'path')
      const info = await (toBool(follow, 'follow_symlinks') ? stat(path) : lstat(path)).catch(() => undefined)
      return info === undefined ? '' : modeString(info.mode)
    },
  },
  find: {
    doc: "Approximate the Unix ``find`` command: return the paths under path matching every option given.\n\nname / iname\n    Glob on the base name (iname: case-insensitive).\nregex / iregex\n    Python regex on the whole path.\ntype\n    Letters of f (file), d (dir), l (link), b, c, p, s.\nmaxdepth / mindepth\n    Depth limits (the path itself is depth 0).\nsize\n    [+-]N[bkmgtw]: larger (+), smaller (-) or exactly.\nmtime\n    [+-]N[smhdw]: modified longer ago (+) or more recently (-).\nuser / group\n    Owner name or id.\n\nAt most 100,000 paths are returned; past that the list ends with a marker.\n\nCLI Example:\n\n    brine '*' file.find / type=f name=\\*.bak size=+10m\n    brine '*' file.find /var/log name=\\*.[0-9] mtime=+30d",
    args: ['path'],
    kwargs: true,
    run: async ([pathArg], kwargs, ctx) => await findFiles(ctx, requirePath(pathArg, 'path'), kwargs),
  },
  symlink: {
    doc: "Create a symbolic link at path pointing to src (``force=True`` replaces what is at path).\n\nCLI Example:\n\n    brine '*' file.symlink /path/to/file /path/to/link",
    args: ['src', 'path', 'force', 'atomic'],
    defaults: { force: false, atomic: false },
    run: async ([srcArg, pathArg, force, atomic]) => {
      const src = requireString(srcArg, 'src')
      const path = requirePath(pathArg, 'path')
      const replaceExisting = toBool(force, 'force') || toBool(atomic, 'atomic')
      const current = await exists(path)
      if (current !== undefined) {
        if (current.isSymbolicLink() && (await readlink(path)) === src) return true
        if (!replaceExisting) throw new CommandExecutionError(`Existing path is not a symlink: ${path}`, { path })
        if (current.isDirectory()) throw new CommandExecutionError(`Existing path is a directory: ${path}`, { path })
      }
      if (!(await exists(dirname(path)))?.isDirectory()) throw new CommandExecutionError(`Directory '${dirname(path)}' does not exist`, { path })
      const temporary = `${path}.brine-${process.pid}`
      try {
        await symlink(src, temporary)
        await rename(temporary, path)
      } catch (error) {
        await rm(temporary, { force: true })
        throw new CommandExecutionError(`Could not create '${path}': ${(error as Error).message}`, { path })
      }
      return true
    },
  },
} satisfies ModuleDefinition

// Salt has no file.stat; the name the issue uses is kept, as an alias of file.stats.
export const fileModule: ModuleDefinition = {
  ...FILE_FUNCTIONS,
  stat: { ...FILE_FUNCTIONS.stats, doc: `Alias of file.stats.\n\n${FILE_FUNCTIONS.stats.doc}` },
}
