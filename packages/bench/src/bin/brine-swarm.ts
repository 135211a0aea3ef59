import { parseArgs } from 'node:util'
import { parseLogLevel } from '@brine/core'
import { DEFAULT_SWARM_BATCH, lowerPriority, makeSwarmKeys, MinionSwarm } from '../swarm.js'

// brine-swarm --config <dir> --dir <root>/minions --prefix swarm-zmq- --count 500 [--batch 50] [--nice 10] [--make-keys] [-l warning]
const { values } = parseArgs({
  options: {
    config: { type: 'string' },
    dir: { type: 'string' },
    prefix: { type: 'string', default: 'swarm-' },
    count: { type: 'string' },
    batch: { type: 'string', default: String(DEFAULT_SWARM_BATCH) },
    nice: { type: 'string', default: '0' },
    'make-keys': { type: 'boolean', default: false },
    'log-level': { type: 'string', short: 'l', default: 'warning' },
  },
})
const nice = Number(values.nice)
if (
  values.config === undefined ||
  values.dir === undefined ||
  values.count === undefined ||
  !(Number(values.count) > 0) ||
  !Number.isInteger(nice) ||
  nice < 0 ||
  nice > 19
) {
  process.stderr.write('usage: brine-swarm --config <dir> --dir <dir> --prefix <prefix> --count <n> [--batch <n>] [--nice <0-19>] [--make-keys] [-l <level>]\n')
  process.exit(2)
}
if (nice > 0) lowerPriority(nice)
const layout = { configDir: values.config, dir: values.dir, prefix: values.prefix, count: Number(values.count), batch: Number(values.batch) }
if (values['make-keys']) {
  // Each instance's key pairs, made as its first start would make them; then the process exits.
  try {
    const { created } = await makeSwarmKeys(layout)
    process.stderr.write(`brine-swarm: key pairs of ${layout.count} minions ready (${created} made)\n`)
    process.exit(0)
  } catch (error) {
    process.stderr.write(`brine-swarm: cannot make keys: ${(error as Error).stack ?? String(error)}\n`)
    process.exit(1)
  }
}
const swarm = new MinionSwarm({ ...layout, logLevel: parseLogLevel(values['log-level']) })
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
