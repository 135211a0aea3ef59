import { runBin } from '../bin-runner.js'
import { runMinion } from '../commands/daemon.js'

await runBin(runMinion)
