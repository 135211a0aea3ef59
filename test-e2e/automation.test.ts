import { createHash } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MasterEvent, RunnerClient } from '@brine/client'
import { parseInput } from '@brine/config'
import type { BusEvent } from '@brine/protocol'
import { deadline, freeLoopbackPort } from '@brine/testkit'
import { Fleet } from '@brine/harness'
import { FleetClients } from './helpers/clients.js'
import { bus as fleetBus, TRANSPORTS, useFleets } from './helpers/fleets.js'
import { httpClient } from './helpers/http.js'
import { json } from './helpers/output.js'

const WAIT_MS = 60_000
const startFleet = useFleets()

/** Every event of the master's bus from connect() on, and bounded waits for the ones a test needs. */
class BusLog {
  readonly events: BusEvent[] = []
  readonly #reader: MasterEvent
  readonly #controller = new AbortController()
  readonly #waiters = new Set<() => void>()
  #reading: Promise<void> | undefined

  constructor(sockDir: string) {
    this.#reader = new MasterEvent({ sockDir })
  }

  async connect(): Promise<void> {
    await this.#reader.connect()
    this.#reading = (async () => {
      for await (const event of this.#reader.iter({ match: '', signal: this.#controller.signal })) {
        this.events.push(event)
        for (const wake of this.#waiters) wake()
      }
    })()
  }

  /** The events matching `match` once at least `count` of them have arrived (bounded by WAIT_MS, named `what`). */
  async waitFor(match: (event: BusEvent) => boolean, what: string, count = 1): Promise<BusEvent[]> {
    const found = (): BusEvent[] => this.events.filter(match)
    if (found().length >= count) return found()
    let wake!: () => void
    const arrived = new Promise<void>((resolve) => {
      wake = () => {
        if (found().length >= count) resolve()
      }
    })
    this.#waiters.add(wake)
    try {
      await deadline(arrived, WAIT_MS, what)
    } finally {
      this.#waiters.delete(wake)
    }
    return found()
  }

  async close(): Promise<void> {
    this.#controller.abort()
    await this.#reading
    await this.#reader.close()
  }
}

interface AuditLine {
  cmd: string
  user: string
  auth: string
  via: Record<string, string>
  fun: string
  tgt?: unknown
  arg?: unknown
  kwarg?: Record<string, unknown>
  jid?: string
  result: string
  minions?: string[]
  reason?: string
}

/**
 * The master's audit log, parsed line by line, once the jobs.audit runner (which waits for pending writes) has
 * answered: run in-process, since only its wait is needed here (the tests below check `brine-run jobs.audit` itself).
 */
async function auditLines(fleet: Fleet): Promise<{ text: string; lines: AuditLine[] }> {
  const runner = new RunnerClient({ configDir: fleet.masterConfigDir })
  try {
    await runner.cmd('jobs.audit')
  } finally {
    await runner.close()
  }
  const text = await readFile(join(fleet.masterConfigDir, 'var/log/brine/audit'), 'utf8')
  return {
    text,
    lines: text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as AuditLine),
  }
}

const REACTIONS = {
  deploy: `# Runs the command on the minions the webhook's body names.
deploy_app:
  local.cmd.run:
    - tgt: {{ data.post.minions }}
    - tgt_type: list
    - arg:
      - echo deployed {{ data['post']['version'] }}
    - kwarg:
        env:
          DEPLOY_TOKEN: {{ data.post.token }}
`,
  start: `greet:
  local.test.echo:
    - tgt: {{ data.id }}
    - arg:
      - hello {{ data.id }}
`,
  forbidden: `steal:
  local.grains.items:
    - tgt: '*'
`,
  loop: `again:
  runner.event.send:
    - tag: {{ tag }}
    - data:
        again: true
`,
}

describe.each(TRANSPORTS)('the reactor, events from minions and the audit log over %s', (transport) => {
  let fleet: Fleet
  let dir: string
  let bus: BusLog
  let hook: (path: string, body: unknown) => Promise<number>
  let api: ReturnType<typeof httpClient>
  // The minions' event jobs go through a client in this process, their words typed as `brine` types them: the
  // events are what is checked, and the CLI's output has its own files (the runners' CLI is checked here).
  const clients = new FleetClients()
  const event = async (id: string, fun: string, ...words: string[]): Promise<unknown> => (await clients.run(fleet, id, fun, parseInput(words))).returns

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'brine-reactor-'))
    for (const [name, text] of Object.entries(REACTIONS)) await writeFile(join(dir, `${name}.sls`), text)
    await writeFile(join(dir, 'htpasswd'), `ops:{SHA}${createHash('sha1').update('ops-pw').digest('base64')}\n`)
    const port = await freeLoopbackPort()
    // One fleet for the whole block (the tests build on it), stopped after it.
    fleet = await Fleet.start({
      bus: fleetBus,
      minions: [
        { id: 'web1', transport },
        { id: 'web2', transport },
      ],
      masterConfig: {
        reactor: [
          { 'salt/netapi/hook/deploy': [join(dir, 'deploy.sls')] },
          { 'salt/minion/late*/start': [join(dir, 'start.sls')] },
          { 'salt/netapi/hook/forbidden': [join(dir, 'forbidden.sls')] },
          { 'salt/netapi/hook/loop': [join(dir, 'loop.sls')] },
        ],
        reactor_user: 'reactor',
        reactor_loop_limit: 3,
        // The reactor's user may run cmd.run, test.* and the event.send runner: nothing else.
        external_auth: {
          file: {
            '^filename': join(dir, 'htpasswd'),
            '^filetype': 'htpasswd',
            reactor: ['cmd.run', 'test.*', { '@runner': ['event\\.send'] }],
            ops: ['test.*'],
          },
        },
        netapi_enable_clients: ['local'],
        minion_event_max_bytes: 2048,
        rest_cherrypy: { port, host: '127.0.0.1', disable_ssl: true, webhook_disable_auth: true },
      },
    })
    api = httpClient((await fleet.startApi()).url)
    hook = async (path, body) =>
      (await api.call(`/hook/${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } })).status
    bus = new BusLog(fleet.sockDir)
    await bus.connect()
  }, 120_000)

  afterAll(async () => {
    await bus?.close()
    await clients.close()
    await fleet?.stop()
    await rm(dir, { recursive: true, force: true })
  })

  it('a /hook/deploy POST runs cmd.run on the minions its body names, the returns reach the job cache, and the audit masks the token', async () => {
    expect(await hook('deploy', { minions: ['web1', 'web2'], version: 'v42', token: 's3cret-token' })).toBe(200)
    const [created] = await bus.waitFor(
      (event) => /^salt\/job\/\d+\/new$/.test(event.tag) && event.data['fun'] === 'cmd.run',
      'the reaction to publish cmd.run',
    )
    const jid = String(created!.data['jid'])
    expect(created!.data).toMatchObject({ user: 'reactor', tgt: ['web1', 'web2'], tgt_type: 'list', arg: ['echo deployed v42'] })
    await bus.waitFor((event) => event.tag.startsWith(`salt/job/${jid}/ret/`), 'both returns of the deploy', 2)
    const lookup = json((await fleet.run('brine-run', ['jobs.lookup_jid', jid, '--out', 'json'])).stdout)
    expect(lookup).toEqual({ web1: 'deployed v42', web2: 'deployed v42' })

    const { text, lines } = await auditLines(fleet)
    expect(text).not.toContain('s3cret-token')
    const deploys = lines.filter((line) => line.jid === jid)
    expect(deploys).toHaveLength(1)
    expect(deploys[0]).toMatchObject({
      cmd: 'publish',
      user: 'reactor',
      auth: 'reactor',
      fun: 'cmd.run',
      result: 'accepted',
      kwarg: { env: { DEPLOY_TOKEN: '******' } },
    })
    expect(deploys[0]!.via).toMatchObject({ client: 'reactor', tag: 'salt/netapi/hook/deploy', reaction: join(dir, 'deploy.sls') })
    expect(deploys[0]!.minions!.sort()).toEqual(['web1', 'web2'])
    // The lookup above was the CLI's, with the root key.
    expect(lines.find((line) => line.fun === 'jobs.lookup_jid')).toMatchObject({ cmd: 'runner', auth: 'key', result: 'accepted', via: { client: 'cli' } })
    expect(bus.events.some((event) => event.tag === 'brine/audit/publish' && event.data['jid'] === jid)).toBe(true)
  })

  it("a minion's start event triggers a reaction that runs on that minion", async () => {
    const mark = bus.events.length
    await fleet.startMinion({ id: 'late1', transport })
    const [created] = await bus.waitFor(
      (event) => bus.events.indexOf(event) >= mark && /^salt\/job\/\d+\/new$/.test(event.tag) && event.data['fun'] === 'test.echo',
      "the start reaction's publish",
    )
    expect(created!.data).toMatchObject({ tgt: 'late1', arg: ['hello late1'], user: 'reactor' })
    const [ret] = await bus.waitFor((event) => event.tag === `salt/job/${String(created!.data['jid'])}/ret/late1`, "late1's return")
    expect(ret!.data['return']).toBe('hello late1')
    const { lines } = await auditLines(fleet)
    expect(lines.filter((line) => line.jid === created!.data['jid'])).toEqual([
      expect.objectContaining({ cmd: 'publish', fun: 'test.echo', result: 'accepted', via: expect.objectContaining({ tag: 'salt/minion/late1/start' }) }),
    ])
  })

  it('a reaction to a function the reactor user may not run is refused, audited, and fired as a reactor error', async () => {
    expect(await hook('forbidden', {})).toBe(200)
    const [error] = await bus.waitFor(
      (event) => event.tag === 'brine/reactor/error' && event.data['tag'] === 'salt/netapi/hook/forbidden',
      'the reactor error event',
    )
    expect(error!.data['error']).toMatchObject({ name: 'PermissionDeniedError' })
    const audited = json((await fleet.run('brine-run', ['jobs.audit', 'result=refused', '--out', 'json'])).stdout) as unknown as AuditLine[]
    const refused = audited.filter((line) => line.fun === 'grains.items')
    expect(refused).toHaveLength(1)
    expect(refused[0]).toMatchObject({
      cmd: 'publish',
      user: 'reactor',
      auth: 'reactor',
      result: 'refused',
      via: { client: 'reactor', tag: 'salt/netapi/hook/forbidden' },
    })
    expect(refused[0]!.reason).toMatch(/may not run "grains.items"/)
    // Nothing was published for it.
    expect(bus.events.some((event) => /^salt\/job\/\d+\/new$/.test(event.tag) && event.data['fun'] === 'grains.items')).toBe(false)
  })

  it('a reaction that fires the event it reacts to stops at reactor_loop_limit with a log line', async () => {
    const logged = fleet.master.waitForOutput(/reactor: refused to react to "salt\/netapi\/hook\/loop".*reactor_loop_limit \(3\)/, WAIT_MS)
    expect(await hook('loop', { first: true })).toBe(200)
    await bus.waitFor((event) => event.tag === 'brine/reactor/refused' && event.data['tag'] === 'salt/netapi/hook/loop', 'the loop refusal')
    await logged
    // The hook, then one event per reaction: three reactions ran (each fired the tag once more), the fourth was refused.
    const loops = bus.events.filter((event) => event.tag === 'salt/netapi/hook/loop')
    expect(loops).toHaveLength(4)
    const { lines } = await auditLines(fleet)
    expect(lines.filter((line) => line.fun === 'event.send' && line.user === 'reactor' && line.result === 'accepted')).toHaveLength(3)
  })

  it("a call through the REST API is audited with its eauth user and the HTTP caller's address", async () => {
    const send = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      api.call(path, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } })
    const login = await send('/login', { username: 'ops', password: 'ops-pw', eauth: 'file' })
    const token = String((login.json as { return: Array<{ token: string }> }).return[0]!.token)
    const ran = await send('/', [{ client: 'local', tgt: 'web1', fun: 'test.ping' }], { 'x-auth-token': token })
    expect(ran.json).toEqual({ return: [{ web1: true }] })
    const refused = await send('/', [{ client: 'local', tgt: 'web1', fun: 'cmd.run', arg: ['id'] }], { 'x-auth-token': token })
    expect(refused.status).toBe(401) // salt-api answers a refusal with 401; the body names the rule
    const audited = json((await fleet.run('brine-run', ['jobs.audit', 'user=ops', '--out', 'json'])).stdout) as unknown as AuditLine[]
    expect(audited.map((line) => [line.fun, line.result])).toEqual([
      ['test.ping', 'accepted'],
      ['cmd.run', 'refused'],
    ])
    for (const line of audited) expect(line).toMatchObject({ cmd: 'publish', auth: 'token', eauth: 'file', via: { client: 'api', address: '127.0.0.1' } })
  })

  it('event.send and event.fire_master reach the bus under salt/minion/<id>/, which a minion cannot leave; an oversized event is refused', async () => {
    expect(await event('web1', 'event.send', 'deploy/done', '{ok: true}')).toEqual({ web1: true })
    const [done] = await bus.waitFor((event) => event.tag === 'salt/minion/web1/deploy/done', 'the event web1 sent')
    expect(done!.data).toMatchObject({ ok: true, id: 'web1' })
    // A job tag from a minion is put under its own prefix: it cannot forge a return.
    await event('web2', 'event.fire_master', '{forged: true}', 'salt/job/20260101000000000000/ret/web1')
    await bus.waitFor((event) => event.tag === 'salt/minion/web2/salt/job/20260101000000000000/ret/web1', 'the prefixed event of web2')
    expect(bus.events.some((event) => event.tag === 'salt/job/20260101000000000000/ret/web1')).toBe(false)
    const big = (await event('web1', 'event.send', 'big', `{blob: ${'x'.repeat(4096)}}`)) as Record<string, unknown>
    expect(String(big['web1'])).toMatch(/minion_event_max_bytes/)
    expect(bus.events.some((event) => event.tag === 'salt/minion/web1/big')).toBe(false)
    // brine-call without --local fires at the master too, as Salt's salt-call does, authenticated with the minion's keys.
    const called = await fleet.run('brine-call', ['event.send', 'called/done', '{via: brine-call}'], { configDir: fleet.minionConfigDir('web1') })
    expect([called.stdout, called.code]).toEqual(['local:\n    True\n', 0])
    const [fired] = await bus.waitFor((event) => event.tag === 'salt/minion/web1/called/done', 'the event brine-call sent')
    expect(fired!.data).toMatchObject({ via: 'brine-call', id: 'web1' })
  })
})

describe.each(TRANSPORTS)('schedules over %s', (transport) => {
  it('a minion schedule returns to the job cache every 2 s, schedule.disable stops it, an added entry survives a restart; a master schedule runs a runner', async () => {
    const fleet = await startFleet({
      minions: [{ id: 'web1', transport, config: { schedule: { tick: { function: 'test.echo', args: ['tick'], seconds: 2 } } } }],
      masterConfig: { schedule: { housekeeping: { function: 'event.send', args: ['housekeeping/tick'], seconds: 2 } } },
    })
    const bus = new BusLog(fleet.sockDir)
    await bus.connect()
    // The jobs and runners here are means (the CLI's own output has its e2e files): clients in this process, not a
    // `brine` or `brine-run` process each. The master keeps running; only the minion restarts.
    const clients = new FleetClients()
    try {
      const isTick = (event: BusEvent): boolean => /^salt\/job\/\d+\/ret\/web1$/.test(event.tag) && event.data['schedule'] === 'tick'
      const ticks = await bus.waitFor(isTick, 'three returns of the tick schedule', 3)
      const jids = ticks.slice(0, 3).map((event) => String(event.data['jid']))
      expect(new Set(jids).size).toBe(3)
      const listed = (await clients.runner(fleet, 'jobs.list_jobs', [], { search_function: 'test.echo' })) as Record<string, unknown>
      for (const jid of jids) expect(listed[jid]).toMatchObject({ Function: 'test.echo', Target: 'web1', User: 'Schedule' })
      expect(await clients.runner(fleet, 'jobs.lookup_jid', [jids[0]!])).toEqual({ web1: 'tick' })

      // schedule.disable: no tick starts after it. A 5 s job (more than two intervals) is the clock.
      const disabled = await clients.run(fleet, 'web1', 'schedule.disable')
      expect(disabled.allSucceeded).toBe(true)
      const disableJid = disabled.jid
      expect((await clients.run(fleet, 'web1', 'test.sleep', [5], { timeout: 30_000 })).returns).toEqual({ web1: true })
      const late = bus.events.filter(isTick).filter((event) => String(event.data['jid']) > disableJid)
      expect(late).toEqual([])

      // An entry added at run time (persisted) and the schedule enabled again, then the minion restarted.
      const added = await clients.run(fleet, 'web1', 'schedule.add', ['later'], { kwarg: { function: 'test.echo', job_args: ['after'], seconds: 2 } })
      expect(added.returns['web1']).toMatchObject({ result: true })
      expect((await clients.run(fleet, 'web1', 'schedule.enable')).allSucceeded).toBe(true)
      await fleet.minions.get('web1')!.stop()
      const mark = bus.events.length
      await fleet.startMinion({ id: 'web1', transport, config: { schedule: { tick: { function: 'test.echo', args: ['tick'], seconds: 2 } } } })
      const [after] = await bus.waitFor(
        (event) => bus.events.indexOf(event) >= mark && /^salt\/job\/\d+\/ret\/web1$/.test(event.tag) && event.data['schedule'] === 'later',
        "the added entry's return after the restart",
      )
      expect(after!.data['return']).toBe('after')

      // The master's own schedule: its runner ran (as `schedule`) and fired its event.
      const [ran] = await bus.waitFor(
        (event) => /^salt\/run\/\d+\/ret$/.test(event.tag) && event.data['fun'] === 'runner.event.send',
        "the master schedule's runner",
      )
      expect(ran!.data).toMatchObject({ user: 'schedule', success: true })
      await bus.waitFor((event) => event.tag === 'housekeeping/tick', "the master schedule's event")
      const audited = (await clients.runner(fleet, 'jobs.audit', [], { user: 'schedule', fun: 'event.send' })) as AuditLine[]
      expect(audited.length).toBeGreaterThan(0)
      expect(audited[0]).toMatchObject({ cmd: 'runner', auth: 'schedule', via: { client: 'schedule', name: 'housekeeping' }, result: 'accepted' })
    } finally {
      await clients.close()
      await bus.close()
    }
  })
})
