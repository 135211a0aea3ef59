import { enableCompileCache as enableNodeCompileCache, flushCompileCache as flushNodeCompileCache } from 'node:module'
import { homedir } from 'node:os'
import { isAbsolute, join } from 'node:path'

/**
 * Brine's directory under the user's cache directory (`$XDG_CACHE_HOME`, or `~/.cache`): `<that>/brine`; `undefined`
 * when there is no home to put it in.
 */
export function userCacheDir(env: NodeJS.ProcessEnv = process.env, home: () => string = homedir): string | undefined {
  if (env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME)) return join(env.XDG_CACHE_HOME, 'brine')
  try {
    const dir = home()
    return dir === '' ? undefined : join(dir, '.cache', 'brine')
  } catch {
    return undefined
  }
}

/**
 * Where the commands keep Node's compile cache: `NODE_COMPILE_CACHE` when the user set it, else
 * `brine/compile-cache` under the user's cache directory (`$XDG_CACHE_HOME`, or `~/.cache`); `undefined`
 * when there is no home to put it in.
 */
export function compileCacheDir(env: NodeJS.ProcessEnv = process.env, home: () => string = homedir): string | undefined {
  if (env.NODE_COMPILE_CACHE) return env.NODE_COMPILE_CACHE
  const dir = userCacheDir(env, home)
  return dir === undefined ? undefined : join(dir, 'compile-cache')
}

/**
 * Where a command keeps its config files' parses (`brine/config` under the user's cache directory), so that a run
 * whose config has not changed does not load and run the YAML parser; `undefined` without a home, or when
 * `BRINE_DISABLE_CONFIG_CACHE` is set.
 */
export function configCacheDir(env: NodeJS.ProcessEnv = process.env, home: () => string = homedir): string | undefined {
  if (env.BRINE_DISABLE_CONFIG_CACHE) return undefined
  const dir = userCacheDir(env, home)
  return dir === undefined ? undefined : join(dir, 'config')
}

/**
 * Turns on Node's module compile cache before a command loads its modules, so every run after the first
 * reuses the bytecode V8 made for them instead of parsing and compiling them again. `NODE_DISABLE_COMPILE_CACHE`
 * turns it off, as it does for Node itself. A cache that cannot be written (read-only home) costs only the speed.
 */
export function enableCompileCache(env: NodeJS.ProcessEnv = process.env): void {
  if (env.NODE_DISABLE_COMPILE_CACHE) return
  const dir = compileCacheDir(env)
  if (dir === undefined) return
  try {
    enableNodeCompileCache(dir)
  } catch {
    // Only the speed-up is lost.
  }
}

/**
 * Writes the compile cache of the modules loaded so far, which Node otherwise writes at exit. A daemon started as
 * root does so before it switches to its `user:`, who could no longer write into root's cache directory: without
 * it each of its starts compiled every module afresh. A cache that cannot be written costs only the speed.
 */
export function flushCompileCache(): void {
  try {
    flushNodeCompileCache()
  } catch {
    // Only the speed-up is lost.
  }
}

const NATIVE_MSGPACK_SWITCH = 'MSGPACKR_NATIVE_ACCELERATION_DISABLED'

/**
 * Loads a short-lived command's modules without msgpackr's native string extractor. It pays off when a process
 * decodes many large messages (a daemon); a command decodes a few, and loading the addon with its nine loader
 * modules costs it more at start than it ever saves. The switch is msgpackr's own, read once when it loads; it is
 * set only while the modules load, so the commands a user's job runs never inherit it, and a user's own setting wins.
 */
export async function importWithoutNativeMsgpack<T>(load: () => Promise<T>, env: NodeJS.ProcessEnv = process.env): Promise<T> {
  if (env[NATIVE_MSGPACK_SWITCH] !== undefined) return load()
  env[NATIVE_MSGPACK_SWITCH] = 'true'
  try {
    return await load()
  } finally {
    delete env[NATIVE_MSGPACK_SWITCH]
  }
}
