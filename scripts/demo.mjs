#!/usr/bin/env node
// The README demo: a master serving three transports and four minions (two on ZeroMQ, one on TCP, one on
// NATS through a nats-server of its own) as real processes on loopback in a temporary root; real jobs
// through the real CLI, printed as a user sees them. Everything it starts is stopped by pid, on success,
// failure or Ctrl-C. NATS needs the nats-server binary: `npm run nats` installs it.
import { MasterEvent } from '@brine/client'
import { tags } from '@brine/protocol'
import { killAllProcesses } from '@brine/testkit'
import { Fleet } from '@brine/harness'

const minions = [
  { id: 'web1', transport: 'zeromq', grains: { role: 'web' } },
  { id: 'web2', transport: 'tcp', grains: { role: 'web' } },
  { id: 'db1', transport: 'zeromq', grains: { role: 'db' } },
  { id: 'cache1', transport: 'nats', grains: { role: 'cache' } },
]

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    killAllProcesses()
    process.exit(130)
  })
}

const say = (text) => process.stdout.write(`${text}\n`)
say('Starting a nats-server, a master (zeromq + tcp + nats) and 4 minions on 127.0.0.1 ...')
const bus = { open: (options) => new MasterEvent(options), tags }
const fleet = await Fleet.start({ bus, minions, transports: ['zeromq', 'tcp', 'nats'] })
let failed = false
try {
  for (const [transport, ports] of fleet.ports) say(`  master ${transport}: publish_port ${ports.publish}, ret_port ${ports.ret}`)
  say(`  nats-server: ${fleet.natsServer.url}`)
  say(`  minions: ${minions.map((m) => `${m.id} (${m.transport}, role ${m.grains.role})`).join(', ')}`)
  const commands = [
    ['brine', ['*', 'test.ping']],
    ['brine', ['*', 'cmd.run', 'uname -sr']],
    ['brine', ['-G', 'role:web', 'grains.item', 'os', 'kernel']],
    ['brine-key', ['-L']],
  ]
  for (const [bin, args] of commands) {
    say(`\n$ ${bin} ${args.map((a) => (/[\s*:]/.test(a) ? `'${a}'` : a)).join(' ')}`)
    const result = await fleet.run(bin, args, { ms: 60_000 })
    process.stdout.write(result.stdout)
    if (result.stderr !== '') process.stdout.write(result.stderr)
    if (result.code !== 0) {
      failed = true
      say(`(exit code ${result.code})`)
    }
  }
} finally {
  await fleet.stop()
}
say(failed ? '\nDemo finished with errors.' : '\nDemo finished: every process it started has been stopped.')
process.exitCode = failed ? 1 : 0
