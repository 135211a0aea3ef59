import { runBin } from '../bin-runner.js'
import { runKey } from '../commands/key.js'

/** The `brine-key` command as one CommonJS file: see ./brine.ts. */
export function main(): Promise<void> {
  return runBin(runKey)
}
