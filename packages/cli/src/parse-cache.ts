import { fileConfigParseCache, type ConfigParseCache } from '@brine/config'
import { configCacheDir } from './compile-cache.js'
import type { CommandIO } from './io.js'

/**
 * The config parse cache of a command run as a process (its `io.env`: `brine/config` under the user's cache directory,
 * see {@link configCacheDir}); none for one run in a test's memory. `loadConfig`'s options, spread.
 */
export function parseCacheOption(io: CommandIO): { parseCache?: ConfigParseCache } {
  const dir = io.env === undefined ? undefined : configCacheDir(io.env)
  return dir === undefined ? {} : { parseCache: fileConfigParseCache(dir) }
}
