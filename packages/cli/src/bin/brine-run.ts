import { runBin } from '../bin-runner.js'
import { runRun } from '../commands/run.js'

await runBin(runRun)
