import { parseArgs } from 'node:util'
import { parseLogLevel } from '@brine/core'
import { MinionSwarm } from '../swarm.js'

// brine-swarm --dir <root>/minions --prefix swarm-zmq- --count 500 [--batch 50] [-l warning]
const { values } = parseArgs({
  options: {
    dir: { type: 'string' },
    prefix: { type: 'string', default: 'swarm-' },
    count: { type: 'string' },
    batch: { type: 'string', default: '50' },
    'log-level': { type: 'string', short: 'l', default: 'warning' },
  },
})
if (values.dir === undefined || values.count === undefined || !(Number(values.count) > 0)) {
  process.stderr.write('usage: brine-swarm --dir <dir> --prefix <prefix> --count <n> [--batch <n>] [-l <level>]\n')
  process.exit(2)
}
const swarm = new MinionSwarm({
  dir: values.dir,
  prefix: values.prefix,
  count: Number(values.count),
  batch: Number(values.batch),
  logLevel: parseLogLevel(values['log-level']),
})
let signals = 0
const onSignal = (signal: NodeJS.Signals): void => {
  if (++signals > 1) process.exit(signal === 'SIGINT' ? 130 : 143)
  void swarm.stop().then(() => {
    const saved = swarm.cache.stats()
    process.stderr.write(
      `brine-swarm: ${swarm.minions.length} minions stopped; shared publish cache: ${saved.reusedPublishes} publishes reused, ` +
        `${saved.nativeVerifies} signatures verified, ${saved.cachedVerifies} verifications from memory\n`,
    )
    process.exit(0)
  })
  // A minion that cannot stop must not keep the process alive.
  setTimeout(() => process.exit(1), 10_000).unref()
}
process.on('SIGINT', onSignal)
process.on('SIGTERM', onSignal)
try {
  await swarm.start()
} catch (error) {
  process.stderr.write(`brine-swarm: cannot start: ${(error as Error).stack ?? String(error)}\n`)
  await swarm.stop()
  process.exit(1)
}
process.stderr.write(`brine-swarm: ${swarm.minions.length} minions started\n`)
