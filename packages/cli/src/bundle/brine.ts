import { runBin } from '../bin-runner.js'
import { runBrine } from '../commands/brine.js'

/**
 * The `brine` command as one CommonJS file (`dist/bundle/brine.cjs`, see tsup.config.ts): what `src/bin/brine.ts`
 * runs, with the workspace packages and their pure-JavaScript dependencies inlined. The launcher (bin/bundle.js)
 * turns the compile cache on before it loads this file and calls `main` once it has.
 */
export function main(): Promise<void> {
  return runBin(runBrine)
}
