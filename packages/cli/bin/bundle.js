// Plain JavaScript, run by the launcher (launch.js) before any of Brine loads.
//
// The short-lived commands and the minion daemon named in ../tsup.config.ts are also built as one CommonJS file each,
// dist/bundle/<name>.cjs: the command with the workspace packages and the pure-JavaScript dependencies it loads inlined.
// Node then reads one file and takes one entry from the compile cache instead of resolving, reading and linking some
// fifty modules (docs/performance.md, "The `brine` command as one file"), and an idle minion holds less of them
// ("An idle minion, third pass"). The modules stay the command's fallback: the launcher runs
// the bundle only when it matches what it was built from (bundleTarget), so a checkout where another package was
// rebuilt since, or a copy whose files differ, runs the modules as before.
import { existsSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const CLI_ROOT = fileURLToPath(new URL('..', import.meta.url))

/**
 * The path of `name`'s bundle when it may run: built (its manifest, dist/bundle/<name>.json, is there) and current.
 * Current means every workspace file it inlined is beside this package, of the size it had when the bundle was built,
 * and, in a checkout (lerna.json two levels up: the packages are built there, so their times mean something), not
 * written since the bundle was built. An installed copy's times are those of its unpacking, so there sizes alone are
 * compared. `BRINE_DISABLE_BUNDLE` (any value) runs the modules instead. Undefined when the modules should run.
 */
export function bundleTarget(name, env = process.env, root = CLI_ROOT) {
  if (env.BRINE_DISABLE_BUNDLE) return undefined
  const bundle = join(root, 'dist', 'bundle', `${name}.cjs`)
  let manifest
  try {
    manifest = JSON.parse(readFileSync(join(root, 'dist', 'bundle', `${name}.json`), 'utf8'))
  } catch {
    return undefined
  }
  const checkout = existsSync(join(root, '..', '..', 'lerna.json'))
  for (const [file, size] of Object.entries(manifest.files ?? {})) {
    const stat = statSync(join(root, file), { throwIfNoEntry: false })
    if (stat === undefined || stat.size !== size || (checkout && stat.mtimeMs > manifest.builtAt)) return undefined
  }
  return existsSync(bundle) ? bundle : undefined
}

/**
 * Runs `name`'s bundle if it may run (bundleTarget) and returns true; false when the launcher should import the
 * command's modules. The compile cache is on before the bundle loads, and msgpackr's native extractor is off while it
 * loads, as src/bin/<name>.ts does for the modules.
 */
export async function runBundle(name) {
  const bundle = bundleTarget(name)
  if (bundle === undefined) return false
  const { enableCompileCache, importWithoutNativeMsgpack } = await import('../dist/compile-cache.js')
  enableCompileCache()
  const { main } = await importWithoutNativeMsgpack(async () => createRequire(import.meta.url)(bundle))
  await main()
  return true
}
