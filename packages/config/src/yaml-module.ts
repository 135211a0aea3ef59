import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

/** What this package uses of the `yaml` package. */
export type YamlModule = typeof import('./yaml-bundle.js')

let loaded: YamlModule | undefined

/**
 * The `yaml` package, loaded the first time YAML is read rather than with this package: a command whose config
 * comes from the parse cache (config-cache.ts) and whose arguments need no typing never loads it, and yaml's
 * parser is the largest thing this package holds (its module's load and its first parse were a tenth of a `brine`
 * command's CPU time). It is synchronous, as the APIs that read YAML are. Built, it is one CommonJS file beside this
 * package's bundle (`yaml-bundle.cjs`, yaml's 72 modules in one, so Node resolves one file and caches its bytecode);
 * run from the sources (the tests), the package itself.
 */
export function yamlModule(): YamlModule {
  if (loaded === undefined) {
    const require = createRequire(import.meta.url)
    const bundle = fileURLToPath(new URL('./yaml-bundle.cjs', import.meta.url))
    loaded = (existsSync(bundle) ? require(bundle) : require('yaml')) as YamlModule
  }
  return loaded
}
