import { runBin } from '../bin-runner.js'
import { runRun } from '../commands/run.js'

/** The `brine-run` command as one CommonJS file: see ./brine.ts. */
export function main(): Promise<void> {
  return runBin(runRun)
}
