import { runBin } from '../bin-runner.js'
import { runCall } from '../commands/call.js'

await runBin(runCall)
