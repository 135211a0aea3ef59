/**
 * Salt's runners through the built brine-run, a list target naming an id that is not a minion, and a
 * minion whose master name does not resolve: real daemons over every transport (issue 32).
 */
import { describe, expect, it } from 'vitest'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'

const startFleet = useFleets()

const json = (text: string): unknown => JSON.parse(text) as unknown

describe.each(TRANSPORTS)("Salt's runners and a newcomer's mistakes through the built CLIs over %s", (transport) => {
  it('brine-run test.arg, test.stream with its progress, jobs.exit_success, manage.present, cache.grains; brine-key -F; brine -L web1,ghost; an unresolvable master name', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'web1', transport, grains: { role: 'web' } },
        { id: 'db1', transport },
      ],
    })

    const arg = await fleet.run('brine-run', ['test.arg', 'a', 'b=1', '__pub_x=2', '--out', 'json'])
    expect(json(arg.stdout)).toEqual({ args: ['a'], kwargs: { b: 1 } })
    expect(arg.code).toBe(0)

    // salt-run prints each progress event as it fires ({suffix, event} through the outputter), then the return.
    const stream = await fleet.run('brine-run', ['test.stream'])
    expect(stream.code).toBe(0)
    const percents = [
      ...stream.stdout.matchAll(/^event:\n {4}-{10}\n {4}_stamp:\n {8}\S+\n {4}message:\n {8}Runner is (\d+)% done\nsuffix:\n {4}progress\n/gm),
    ].map((match) => Number(match[1]))
    expect(percents).toEqual(Array.from({ length: 99 }, (_, index) => index + 1))
    expect(stream.stdout.endsWith('Runner is 99% done\nsuffix:\n    progress\nTrue\n')).toBe(true)
    const streamJson = await fleet.run('brine-run', ['test.stream', '--out', 'json', '--out-indent', '-1'])
    const lines = streamJson.stdout.trimEnd().split('\n').map(json)
    expect(lines).toHaveLength(100)
    expect(lines[0]).toEqual({ suffix: 'progress', event: { message: 'Runner is 1% done', _stamp: expect.any(String) } })
    expect(lines[99]).toBe(true)

    const ping = await fleet.run('brine', ['web1', 'test.ping', '--show-jid'])
    expect(ping.code).toBe(0)
    const jid = /^jid: (\d{20})$/m.exec(ping.stdout)?.[1]
    expect(jid).toBeDefined()
    expect(json((await fleet.run('brine-run', ['jobs.exit_success', jid!, '--out', 'json'])).stdout)).toEqual({ web1: true })
    expect(json((await fleet.run('brine-run', ['manage.present', '--out', 'json'])).stdout)).toEqual(['db1', 'web1'])
    expect(json((await fleet.run('brine-run', ['cache.grains', 'web*', '--out', 'json'])).stdout)).toEqual({
      web1: expect.objectContaining({ role: 'web', id: 'web1' }),
    })

    // salt-key -F lists the master's own key under Local Keys.
    const fingers = json((await fleet.run('brine-key', ['-F', '--out', 'json'])).stdout) as Record<string, Record<string, string>>
    expect(Object.keys(fingers['minions'] ?? {}).sort()).toEqual(['db1', 'web1'])
    expect(Object.keys(fingers['local'] ?? {})).toEqual(['master.pub'])

    // Salt reports a listed id that is not an accepted minion as not returning, and exits 1.
    const listed = await fleet.run('brine', ['-L', 'web1,ghost', 'test.ping'])
    expect(listed.stdout).toContain('web1:\n    True\n')
    expect(listed.stdout).toMatch(/ghost:\n {4}Minion did not return\. \[No response\]/)
    expect(listed.stderr).toContain('ERROR: Minions returned with non-zero exit code')
    expect(listed.code).toBe(1)

    // A minion told to use a master name that does not resolve says so (the resolver's error), not only a timeout.
    const lost = await fleet.startMinion({ id: 'lost', transport, config: { master: 'ghost.invalid' } })
    const said = await lost.waitForOutput(/the master's name 'ghost\.invalid' does not resolve: getaddrinfo \S+ ghost\.invalid/, 20_000)
    expect(said[0]).toContain('ghost.invalid')
    expect(lost.stderr).not.toMatch(/timed out/)
  })
})
