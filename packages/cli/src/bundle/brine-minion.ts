import { runBin } from '../bin-runner.js'
import { runMinion } from '../commands/daemon.js'

/** The `brine-minion` daemon as one CommonJS file: see ./brine.ts. */
export function main(): Promise<void> {
  return runBin(runMinion)
}
