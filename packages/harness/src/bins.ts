import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { HarnessSetupError } from '@brine/testkit'

/**
 * The directory of the package named `name` that holds the module at `moduleUrl` (its `import.meta.url`),
 * found by walking up: a module runs from src/ (tests), dist/index.js and dist/bin/*.js alike.
 */
export function packageDir(name: string, moduleUrl: string): string {
  const start = fileURLToPath(moduleUrl)
  let dir = dirname(start)
  for (;;) {
    const manifest = join(dir, 'package.json')
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === name) return dir
    const parent = dirname(dir)
    if (parent === dir) throw new HarnessSetupError(`cannot find ${name}'s package.json above ${start}`, { file: start, package: name })
    dir = parent
  }
}

let cliBins: Map<string, string> | undefined

/**
 * `@brine/cli`'s commands, each the absolute path of the file its `bin` map names, in the copy of `@brine/cli` that
 * module resolution finds from here (a workspace link in the repository, or an installed package beside this one).
 */
function cliBinMap(): Map<string, string> {
  if (cliBins !== undefined) return cliBins
  let manifestPath: string
  try {
    manifestPath = createRequire(import.meta.url).resolve('@brine/cli/package.json')
  } catch (error) {
    throw new HarnessSetupError(
      'cannot resolve @brine/cli from @brine/harness: install it (npm install) beside the harness',
      { package: '@brine/cli' },
      { cause: error },
    )
  }
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { bin?: Record<string, string> }
  cliBins = new Map(Object.entries(manifest.bin ?? {}).map(([name, file]) => [name, join(dirname(manifestPath), file)]))
  return cliBins
}

/** The file `@brine/cli` runs as the command `name` (e.g. `brine-master`), resolved as a package: its launcher, which loads the build. */
export function binPath(name: string): string {
  const bins = cliBinMap()
  const file = bins.get(name)
  if (file === undefined) {
    throw new HarnessSetupError(`@brine/cli has no command ${name} (its bins: ${[...bins.keys()].join(', ')})`, { package: '@brine/cli', bin: name })
  }
  return file
}

/** What a daemon is started with so that it need not re-execute itself: Node's flags before its bin, variables for its environment. */
export interface DaemonStart {
  nodeArgs: string[]
  vars: Record<string, string>
}

type DaemonStartOptions = (name: string, execArgv: readonly string[], env: NodeJS.ProcessEnv) => DaemonStart
let startOptions: Promise<DaemonStartOptions> | undefined

/**
 * How to start the command `name` with Node (`node <nodeArgs> <execArgv> <bin>`) in its runtime at once: the
 * launcher's own table (`bin/daemon-runtime.js` beside the bins of `@brine/cli`), so a master started this way
 * costs one start of Node instead of two (see there). Empty for a command without a runtime.
 */
export async function daemonStart(name: string, execArgv: readonly string[] = [], env: NodeJS.ProcessEnv = process.env): Promise<DaemonStart> {
  startOptions ??= import(pathToFileURL(join(dirname(binPath(name)), 'daemon-runtime.js')).href).then(
    (module: { daemonStartOptions: DaemonStartOptions }) => module.daemonStartOptions,
  )
  return (await startOptions)(name, execArgv, env)
}
