import { runBin } from '../bin-runner.js'
import { runApi } from '../commands/api.js'

await runBin(runApi)
