// Loads a built command from ../dist/bin/. The files in this directory are committed so that npm can link
// them into node_modules/.bin when `npm ci` runs, before anything is built (npm links a bin only if its file
// exists); the root `prepare` script then builds dist/. Run from a checkout that was never built, a command
// says how to build it instead of failing with a module-not-found stack.
import { existsSync } from 'node:fs'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { refuseUnsupportedNode } from './node-version.js'
import { enterDaemonRuntime } from './daemon-runtime.js'
import { runBundle } from './bundle.js'

/**
 * Runs the command once this Node is one Brine supports: its one-file build when there is a current one (bundle.js),
 * else `dist/bin/<name>.js`, which imports its modules.
 */
export async function launch(name) {
  refuseUnsupportedNode(name)
  enterDaemonRuntime(name)
  if (await runBundle(name)) return
  const target = fileURLToPath(new URL(`../dist/bin/${name}.js`, import.meta.url))
  if (!existsSync(target)) {
    const root = fileURLToPath(new URL('../../..', import.meta.url))
    process.stderr.write(`${name}: Brine is not built (${target} is missing); run \`npm run build\` in ${root}\n`)
    process.exit(1)
  }
  await import(pathToFileURL(target).href)
}
