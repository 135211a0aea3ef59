import { silentLogger } from '@brine/core'
import { MAX_TAG_LENGTH } from '@brine/protocol'
import { describe, expect, it } from 'vitest'
import { executeJob } from '../src/executor.js'
import { createModuleRegistry } from '../src/modules/registry.js'
import { RunningJobs } from '../src/modules/running-jobs.js'
import { nextJid } from './modules-fixture.js'

/** A registry whose master link records what event.send and event.fire_master hand it. */
function eventFixture() {
  const sent: { tag: string; data: Record<string, unknown> }[][] = []
  const registry = createModuleRegistry({
    id: 'web1',
    grains: { id: 'web1', os: 'Debian' },
    opts: {},
    logger: silentLogger,
    jobs: new RunningJobs(),
    fireMaster: async (events) => {
      sent.push(events)
    },
  })
  const run = (fun: string, arg: unknown[] = []) => executeJob(registry, { jid: nextJid(), fun, arg })
  return { sent, run }
}

describe('event module', () => {
  it("puts a tag outside the minion's own under salt/minion/<id>/ and adds its id to the data", async () => {
    const { sent, run } = eventFixture()
    expect(await run('event.send', ['deploy/done', { ok: true }])).toMatchObject({ return: true, success: true })
    expect(await run('event.fire_master', [{ n: 1 }, 'salt/minion/web1/custom'])).toMatchObject({ return: true, success: true })
    expect(sent).toEqual([
      [{ tag: 'salt/minion/web1/deploy/done', data: { ok: true, id: 'web1' } }],
      [{ tag: 'salt/minion/web1/custom', data: { n: 1, id: 'web1' } }],
    ])
  })

  it('refuses, before sending, a tag the master would refuse as no tag (control characters, over-long)', async () => {
    const { sent, run } = eventFixture()
    const control = await run('event.send', ['deploy/a\nb'])
    expect(control.success).toBe(false)
    expect(String(control.return)).toMatch(/tag holds the control character U\+000A/)
    const long = await run('event.send', ['x'.repeat(MAX_TAG_LENGTH)])
    expect(long.success).toBe(false)
    expect(String(long.return)).toMatch(new RegExp(`characters long, over ${MAX_TAG_LENGTH}`))
    expect(sent).toEqual([])
  })
})
