import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { ConfigError } from '@brine/config'
import { type BusEvent } from '@brine/protocol'
import { deadline } from '@brine/transport-compliance'
import { createLogger } from '@brine/core'
import type { Caller } from '../src/authorize.js'
import { ReactionError } from '../src/errors.js'
import { EventBus } from '../src/event-bus.js'
import { reactionCalls } from '../src/reactor/reaction.js'
import { Reactor, reactorRules, REACTOR_ERROR_TAG, REACTOR_REFUSED_TAG, type ReactorService } from '../src/reactor/reactor.js'
import { renderReaction } from '../src/reactor/template.js'

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const event = { tag: 'salt/netapi/hook/deploy', data: { post: { minions: ['web1', 'web2'], version: 'v2', nested: { 'odd key': 7 } } } }

describe('reaction files: {{ }} references, never Jinja', () => {
  it('puts a whole value where a reference stands alone, and text where it is part of a string', () => {
    const text =
      "a:\n  local.cmd.run:\n    - tgt: {{ data.post.minions }}\n    - arg:\n      - echo {{ data['post']['version'] }} from {{ tag }}\n    - kwarg:\n        n: {{ data.post.nested['odd key'] }}\n"
    expect(renderReaction('/r.sls', text, event)).toEqual({
      a: { 'local.cmd.run': [{ tgt: ['web1', 'web2'] }, { arg: ['echo v2 from salt/netapi/hook/deploy'] }, { kwarg: { n: 7 } }] },
    })
  })

  it('a value from the event stays a value: YAML in a webhook body adds no keys and no calls', () => {
    const hostile = { tag: 't', data: { name: 'x\nevil:\n  runner.manage.down: []', list: '[1, 2]' } }
    const rendered = renderReaction('/r.sls', 'a:\n  local.test.echo:\n    - tgt: web1\n    - arg: [{{ data.name }}, {{ data.list }}]\n', hostile)
    expect(rendered).toEqual({ a: { 'local.test.echo': [{ tgt: 'web1' }, { arg: ['x\nevil:\n  runner.manage.down: []', '[1, 2]'] }] } })
  })

  it('refuses expressions, Jinja blocks, prototype keys and paths that name nothing, naming the file', () => {
    expect(() => renderReaction('/r.sls', 'a: {{ data.post.version | upper }}', event)).toThrow(
      /\/r\.sls: \{\{ data\.post\.version \| upper \}\} is not a reference/,
    )
    expect(() => renderReaction('/r.sls', "a: {{ __import__('os') }}", event)).toThrow(ReactionError)
    expect(() => renderReaction('/r.sls', '{% for x in data %}a: 1{% endfor %}', event)).toThrow(/no Jinja/)
    expect(() => renderReaction('/r.sls', 'a: {{ data.constructor }}', event)).toThrow(/names nothing in the event/)
    expect(() => renderReaction('/r.sls', 'a: {{ data.post.missing }}', event)).toThrow(/names nothing/)
    expect(() => renderReaction('/r.sls', 'a: [unclosed', event)).toThrow(/is not YAML/)
  })
})

describe("a reaction's calls", () => {
  it("reads Salt's local, runner and wheel forms, with arg, kwarg and args", () => {
    const rendered = {
      one: { 'local.cmd.run': [{ tgt: 'web*' }, { args: [{ cmd: 'uptime' }] }] },
      two: { 'local.test.arg': { tgt: ['a', 'b'], tgt_type: 'list', arg: [1], kwarg: { k: 'v' } } },
      three: { 'runner.jobs.list_jobs': [{ search_function: 'test.*' }] },
      four: { 'wheel.key.accept': [{ args: [{ match: 'web1' }] }] },
    }
    expect(reactionCalls('/r.sls', rendered)).toEqual([
      { id: 'one', form: 'local', fun: 'cmd.run', tgt: 'web*', tgtType: 'glob', arg: [], kwarg: { cmd: 'uptime' } },
      { id: 'two', form: 'local', fun: 'test.arg', tgt: ['a', 'b'], tgtType: 'list', arg: [1], kwarg: { k: 'v' } },
      { id: 'three', form: 'runner', fun: 'jobs.list_jobs', arg: [], kwarg: { search_function: 'test.*' } },
      { id: 'four', form: 'wheel', fun: 'key.accept', kwarg: { match: 'web1' } },
    ])
  })

  it('refuses what it cannot run, saying what', () => {
    expect(() => reactionCalls('/r.sls', { a: { 'caller.test.ping': [] } })).toThrow(/not local.<fun>, runner.<fun> or wheel.<fun>/)
    expect(() => reactionCalls('/r.sls', { a: { 'local.test.ping': [{ arg: [] }] } })).toThrow(/needs tgt/)
    expect(() => reactionCalls('/r.sls', { a: { 'local.test.ping': [{ tgt: '*' }, { tgt_type: 'glob-ish' }] } })).toThrow(/tgt_type must be one of/)
    expect(() => reactionCalls('/r.sls', ['not', 'a', 'mapping'])).toThrow(ReactionError)
  })

  it('reads the reactor setting, refusing relative paths and other shapes', () => {
    expect(reactorRules([{ 'salt/minion/*/start': ['/srv/reactor/start.sls'] }, { 'hook/*': '/srv/reactor/one.sls' }])).toEqual([
      { glob: 'salt/minion/*/start', files: ['/srv/reactor/start.sls'] },
      { glob: 'hook/*', files: ['/srv/reactor/one.sls'] },
    ])
    expect(() => reactorRules([{ 'a/*': ['relative.sls'] }])).toThrow(ConfigError)
    expect(() => reactorRules([{ a: ['/x.sls'], b: ['/y.sls'] }])).toThrow(/one \{tag glob/)
  })
})

describe('the reactor on a bus', () => {
  const caller: Caller = { user: 'reactor', auth: 'reactor', permissions: 'all' }

  async function setup(
    files: Record<string, string>,
    service: (bus: EventBus) => ReactorService,
    rules: (dir: string) => { glob: string; files: string[] }[],
    loopLimit = 3,
  ) {
    const dir = await mkdtemp(join(tmpdir(), 'brine-reactor-'))
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text)
    const bus = new EventBus({ sockDir: join(dir, 'sock') })
    const reactor = new Reactor({ bus, service: service(bus), rules: rules(dir), caller, loopLimit, workers: 2, hwm: 100 })
    reactor.start()
    cleanups.push(
      () => rm(dir, { recursive: true, force: true }),
      () => bus.close(),
      async () => reactor.stop(),
    )
    const seen: BusEvent[] = []
    bus.subscribe((fired) => void seen.push(fired))
    return { dir, bus, reactor, seen }
  }

  it('follows a chain of reactions through what their calls fire, and refuses it at the loop limit', async () => {
    const calls: string[] = []
    const { bus, reactor, seen } = await setup(
      { 'loop.sls': 'again:\n  runner.event.send:\n    - tag: {{ tag }}\n' },
      (bus) => ({
        publish: async () => ({ jid: '1', minions: [] }),
        wheelAsync: () => ({ jid: '1', tag: 't' }),
        // As the event.send runner: fires the tag from inside the call, asynchronously.
        runnerAsync: (_caller, call) => {
          calls.push(String(call.fun))
          void Promise.resolve().then(() => bus.fire(String(call.kwarg && (call.kwarg as Record<string, unknown>)['tag']), {}))
          return { jid: '1', tag: 't' }
        },
      }),
      (dir) => [{ glob: 'loop/*', files: [join(dir, 'loop.sls')] }],
    )
    const refused = new Promise<void>((resolve) => bus.subscribe((fired) => fired.tag === REACTOR_REFUSED_TAG && resolve()))
    bus.fire('loop/start', {})
    await deadline(refused, 10_000, 'the loop refusal')
    await reactor.idle()
    expect(calls).toEqual(['event.send', 'event.send', 'event.send'])
    expect(seen.filter((fired) => fired.tag === 'loop/start')).toHaveLength(4)
    expect(seen.find((fired) => fired.tag === REACTOR_REFUSED_TAG)?.data['reason']).toMatch(/reactor_loop_limit \(3\)/)
  })

  it('refuses reactions past reactor_worker_hwm, one event each, logging a bounded number of lines and a count of the rest', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-reactor-'))
    await writeFile(join(dir, 'ping.sls'), 'p:\n  local.test.ping:\n    - tgt: web1\n')
    const bus = new EventBus({ sockDir: join(dir, 'sock') })
    const lines: string[] = []
    let release = (): void => {}
    const blocked = new Promise<void>((resolve) => (release = resolve))
    const service: ReactorService = {
      // The first reaction holds the only worker, so the next ones wait and the rest find the queue full.
      publish: async () => (await blocked, { jid: '1', minions: [] }),
      runnerAsync: () => ({ jid: '1', tag: 't' }),
      wheelAsync: () => ({ jid: '1', tag: 't' }),
    }
    const reactor = new Reactor({
      bus,
      service,
      rules: [{ glob: 'hook/*', files: [join(dir, 'ping.sls')] }],
      caller,
      loopLimit: 3,
      workers: 1,
      hwm: 2,
      logger: createLogger({ level: 'warning', write: (line) => lines.push(line) }),
      logLimits: { burst: 3, windowMs: 60_000, now: () => 0 },
    })
    reactor.start()
    cleanups.push(
      () => rm(dir, { recursive: true, force: true }),
      () => bus.close(),
      async () => reactor.stop(),
    )
    const refused: BusEvent[] = []
    bus.subscribe((fired) => void (fired.tag === REACTOR_REFUSED_TAG && refused.push(fired)))
    for (let i = 0; i < 20; i++) bus.fire(`hook/${i}`, {})
    // One runs, two wait: seventeen refused, each an event, three of them a log line.
    expect(refused).toHaveLength(17)
    expect(refused[0]?.data['reason']).toMatch(/reactor_worker_hwm \(2\)/)
    expect(lines.filter((line) => line.includes('reactor: refused to react'))).toHaveLength(3)
    release()
    await deadline(reactor.idle(), 10_000, 'the waiting reactions')
    reactor.stop()
    expect(lines.filter((line) => line.includes('14 reactor refusals suppressed'))).toHaveLength(1)
  })

  it('turns a failed reaction into an error event and goes on reacting', async () => {
    const published: unknown[] = []
    const { bus, reactor, seen } = await setup(
      { 'bad.sls': 'a: {{ data.missing }}\n', 'good.sls': 'b:\n  local.test.ping:\n    - tgt: {{ data.id }}\n' },
      () => ({
        publish: async (_caller, job) => (published.push(job), { jid: '1', minions: [] }),
        runnerAsync: () => ({ jid: '1', tag: 't' }),
        wheelAsync: () => ({ jid: '1', tag: 't' }),
      }),
      (dir) => [
        { glob: 'go', files: [join(dir, 'bad.sls'), join(dir, 'good.sls')] },
        { glob: REACTOR_ERROR_TAG, files: [join(dir, 'good.sls')] },
      ],
    )
    bus.fire('go', { id: 'web1' })
    await deadline(reactor.idle(), 10_000, 'the reactions to finish')
    expect(seen.filter((fired) => fired.tag === REACTOR_ERROR_TAG).map((fired) => fired.data['file'])).toEqual([expect.stringMatching(/bad\.sls$/)])
    // The reactor never reacts to its own events, even where a rule names them.
    expect(published).toEqual([expect.objectContaining({ tgt: 'web1', fun: 'test.ping', user: 'reactor' })])
  })
})
