import { runBin } from '../bin-runner.js'
import { runSyndic } from '../commands/daemon.js'

await runBin(runSyndic)
