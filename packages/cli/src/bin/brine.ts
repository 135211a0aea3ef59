import { runBin } from '../bin-runner.js'
import { runBrine } from '../commands/brine.js'

await runBin(runBrine)
