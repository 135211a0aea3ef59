import { runBin } from '../bin-runner.js'
import { runKey } from '../commands/key.js'

await runBin(runKey)
