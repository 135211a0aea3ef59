import { runBin } from '../bin-runner.js'
import { runMaster } from '../commands/daemon.js'

await runBin(runMaster)
