import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { getPriority, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createServer } from 'node:net'
import { afterAll, describe, expect, it } from 'vitest'
import { decode, FrameReader } from '@brine/core'
import { busTagMatcher, eventBusPath, parseBusSubscription } from '@brine/protocol'
import { deadline } from '@brine/testkit'
import { loadConfig } from '@brine/config'
import { LocalClient } from '@brine/client'
import { Fleet, type TransportName } from '@brine/harness'
import { fleetBus, makeSwarmKeysUnder, startSwarm, swarmLayout } from '../src/fleet-swarm.js'
import { generateKeys, newSessionKey, openPublish, sealPublish } from '@brine/crypt'
import { instanceConfig, loadSwarmConfig, makeSwarmKeys, MinionSwarm, SwarmConfigError } from '../src/swarm.js'

const scratch = await mkdtemp(join(tmpdir(), 'brine-swarm-test-'))
afterAll(() => rm(scratch, { recursive: true, force: true }))

const SHARED = 'master: 127.0.0.1\nmaster_port: 4506\ntransport: tcp\nacceptance_wait_time: 0.2\ngrains:\n  roles: [web]\n'

describe("a swarm's shared config", () => {
  it('gives each instance the config a file of its own (with its id and root_dir) would, and a copy of every value', async () => {
    const configDir = join(scratch, 'shared')
    await mkdir(configDir, { recursive: true })
    await writeFile(join(configDir, 'minion'), SHARED)
    const shared = await loadSwarmConfig(configDir)
    const [a, b] = ['web-0', 'web-1'].map((id) => instanceConfig(shared, id, join(scratch, 'minions', id)))
    for (const opts of [a!, b!]) {
      const own = join(scratch, 'own', opts.id)
      await mkdir(own, { recursive: true })
      await writeFile(join(own, 'minion'), `${SHARED}id: ${opts.id}\nroot_dir: ${String(opts.root_dir)}\n`)
      expect(opts).toEqual((await loadConfig('minion', { configDir: own })).opts)
    }
    expect(a!.pki_dir).toBe(join(scratch, 'minions', 'web-0', 'etc/brine/pki/minion'))
    expect(b!.cachedir).toBe(join(scratch, 'minions', 'web-1', 'var/cache/brine/minion'))
    ;(a!.grains as { roles: string[] }).roles.push('db')
    expect(b!.grains).toEqual({ roles: ['web'] })
    expect(shared.grains).toEqual({ roles: ['web'] })
  })

  it.each(['id: web-0', `root_dir: ${scratch}`])(
    'refuses a shared file that sets what each instance has its own of (%s), naming the key and the line',
    async (line) => {
      const configDir = join(scratch, `refused-${line.split(':')[0]!}`)
      await mkdir(configDir, { recursive: true })
      await writeFile(join(configDir, 'minion'), `${SHARED}${line}\n`)
      const error = await loadSwarmConfig(configDir).catch((caught: unknown) => caught)
      expect(error).toBeInstanceOf(SwarmConfigError)
      expect((error as SwarmConfigError).name).toBe('SwarmConfigError')
      expect((error as Error).message).toContain(`${join(configDir, 'minion')}:7: a swarm's shared config must not set ${line.split(':')[0]!}`)
    },
  )

  it("makes each instance's key pairs where its minion reads them, once: a second run keeps them", async () => {
    const layout = { configDir: join(scratch, 'keys-config'), dir: join(scratch, 'keys'), prefix: 'k-', count: 3, batch: 2 }
    expect(await makeSwarmKeys(layout)).toEqual({ created: 3 })
    const pub = join(layout.dir, 'k-2', 'etc/brine/pki/minion/minion.pub')
    const before = await readFile(pub, 'utf8')
    expect(await makeSwarmKeys(layout)).toEqual({ created: 0 })
    expect(await readFile(pub, 'utf8')).toBe(before)
  })
})

const SWARM_BIN = fileURLToPath(new URL('../dist/bin/brine-swarm.js', import.meta.url))

// The swarm as the bench runs it (the built brine-swarm, `npm run build` first): keys made before the fleet launches, one
// shared config, the host's grains computed once; each minion authenticates with its own pre-made key and answers as itself.
describe("a swarm's shared publish cache", () => {
  it('opens each publish of a 200-job burst once for all its minions, though each minion opens the whole burst before the next one starts', () => {
    const master = generateKeys()
    const session = newSessionKey(1)
    const burst = Array.from({ length: 200 }, (_, index) => sealPublish({ fun: 'test.ping', jid: `2026112700000000${index}` }, session, master.sign.secretKey))
    const { cache } = new MinionSwarm({ configDir: scratch, dir: scratch, prefix: 'web-', count: 0 })
    const minions = 20
    for (let minion = 0; minion < minions; minion++) {
      for (const [index, envelope] of burst.entries()) {
        expect(openPublish(structuredClone(envelope), session, master.sign.publicKey, cache)).toEqual({ fun: 'test.ping', jid: `2026112700000000${index}` })
      }
    }
    expect(cache.stats()).toEqual({ nativeVerifies: burst.length, cachedVerifies: 0, reusedPublishes: (minions - 1) * burst.length })
  })
})

describe("a bench fleet's bus reader", () => {
  it("asks the master for the start and auth events the fleet waits on, not a job's events", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-fleet-bus-'))
    const reader = fleetBus.open({ sockDir: dir, reconnect: { initial: 10, max: 20 } })
    const server = createServer()
    try {
      const first = new Promise<unknown>((resolve) => {
        server.on('connection', (socket) => {
          const frames = new FrameReader({ onFrame: (body) => resolve(decode(body)), onOversize: () => {} })
          socket.on('data', (chunk: Buffer) => frames.push(chunk))
        })
      })
      await new Promise<void>((resolve) => server.listen(eventBusPath(dir), resolve))
      await reader.connect()
      const accepts = busTagMatcher(parseBusSubscription(await deadline(first, 10_000, "the reader's subscription")))
      const taken = ['salt/minion/zeromq-s0-1/start', 'salt/syndic/syndic1/start', 'salt/auth']
      const left = ['salt/job/20261128113000000001/new', 'salt/job/20261128113000000001/ret/zeromq-s0-1', 'brine/audit/publish', 'minion_start']
      expect(taken.map(accepts)).toEqual(taken.map(() => true))
      expect(left.map(accepts)).toEqual(left.map(() => false))
    } finally {
      await reader.close()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe.each<TransportName>(['zeromq', 'tcp', 'nats'])('brine-swarm over %s, keys made before the launch', (transport) => {
  it('starts its minions with the keys made before, each answering with its own id and the host grains, every thread at its nice value', async () => {
    if (!existsSync(SWARM_BIN)) throw new Error(`${SWARM_BIN} does not exist: run \`npm run build\` first`)
    const part = { count: 3, prefix: `${transport}-s0-` }
    let fleet: Fleet | undefined
    let client: LocalClient | undefined
    try {
      fleet = await Fleet.start({ bus: fleetBus, minions: [], transports: [transport], beforeLaunch: (root) => makeSwarmKeysUnder(root, part) })
      const layout = swarmLayout(fleet.root, part)
      const made = await Promise.all([0, 1, 2].map((index) => readFile(join(layout.dir, `${part.prefix}${index}`, 'etc/brine/pki/minion/minion.pub'), 'utf8')))
      const from = fleet.startEventCount
      const swarm = await startSwarm(fleet, { ...part, transport, nice: 5 })
      await Promise.all(swarm.ids.map((id) => fleet!.waitForMinionStart(id, from)))
      const threads = readdirSync(`/proc/${swarm.process.pid}/task`).map(Number)
      expect(threads.length).toBeGreaterThan(1)
      expect(threads.map((thread) => getPriority(thread))).toEqual(threads.map(() => 5))
      if (existsSync('/proc/self/autogroup')) expect(readFileSync(`/proc/${swarm.process.pid}/autogroup`, 'utf8')).toMatch(/ nice 5\n$/)
      // The master accepted the keys made before the launch: the swarm made none of its own.
      const accepted = await Promise.all(swarm.ids.map((id) => readFile(join(fleet!.masterConfigDir, 'etc/brine/pki/master/minions', id), 'utf8')))
      expect(accepted.map((text) => text.trim())).toEqual(made.map((text) => text.trim()))
      client = new LocalClient({ configDir: fleet.masterConfigDir, requestTimeout: 30_000 })
      const grains = (await client.cmd(swarm.ids, 'grains.item', ['id', 'kernel', 'num_cpus', 'master'], { tgtType: 'list', timeout: 30 })) as Record<
        string,
        Record<string, unknown>
      >
      expect(Object.keys(grains).sort()).toEqual([...swarm.ids].sort())
      for (const id of swarm.ids) expect(grains[id]).toEqual({ id, kernel: 'Linux', num_cpus: grains[swarm.ids[0]!]!.num_cpus, master: '127.0.0.1' })
      expect(grains[swarm.ids[0]!]!.num_cpus).toBeGreaterThanOrEqual(1)
    } finally {
      await client?.close()
      await fleet?.stop()
    }
  }, 120_000)
})
