import { describe, expect, it } from 'vitest'
import { loadConfig } from '@brine/config'
import { LocalJobCache } from '@brine/returners'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'

const startFleet = useFleets()

describe.each(TRANSPORTS)('brine --return over %s', (transport) => {
  it("sends the return to the master and to the minion's local_cache; an unknown returner is refused before anything is published", async () => {
    const fleet = await startFleet({ minions: [{ id: 'web1', transport }] })

    const unknown = await fleet.run('brine', ['web1', 'test.ping', '--return', 'local_cache,redis'])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toContain("unknown returner 'redis' (available: local_cache)")
    expect(unknown.stdout).toBe('')

    const returned = await fleet.run('brine', ['web1', 'test.echo', 'kept', '--return', 'local_cache', '--show-jid'])
    expect(returned.code).toBe(0)
    const jid = /^jid: (\d{20})\n/.exec(returned.stdout)?.[1]
    expect(jid).toBeDefined()
    expect(returned.stdout).toBe(`jid: ${jid}\nweb1:\n    kept\n`)
    // The master's job cache has it, as without --return.
    const looked = await fleet.run('brine-run', ['jobs.lookup_jid', jid!, '--out', 'json'])
    expect(JSON.parse(looked.stdout)).toEqual({ web1: 'kept' })

    // The minion's own job cache has it too: read once the minion has stopped and let go of it.
    expect(await fleet.minions.get('web1')!.stop('SIGTERM')).toEqual({ code: 0, signal: null })
    const { opts } = await loadConfig('minion', { configDir: fleet.minionConfigDir('web1') })
    const cache = await new LocalJobCache({ cachedir: opts.cachedir }).open()
    try {
      const stored = await cache.getJob(jid!)
      expect(stored?.load).toMatchObject({ jid, fun: 'test.echo', arg: ['kept'], tgt: 'web1', ret: 'local_cache' })
      expect(stored?.returns['web1']).toMatchObject({ id: 'web1', jid, fun: 'test.echo', return: 'kept', retcode: 0, success: true })
      // The refused publish reached no minion: this is the only job the minion stored.
      expect((await cache.listJobs()).map((job) => job.jid)).toEqual([jid])
    } finally {
      await cache.close()
    }
  })
})
