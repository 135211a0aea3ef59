import { describe, expect, it } from 'vitest'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { json } from './helpers/output.js'

const startFleet = useFleets()

/** A long id, for a hostile pattern to backtrack on. */
const LONG = `db-${'a'.repeat(36)}`

// Nodegroups live in the master config only: the fleet's minion configs have none.
const nodegroups = {
  webs: 'web*',
  // A string of plain names is a list target, as in Salt.
  pair: `web2 ${LONG}`,
  // Salt's YAML list form: operators and parentheses are items of their own.
  listed: ['(', 'web*', 'or', 'G@role:db', ')', 'and', 'not', 'L@web2'],
  nested: 'N@webs and not N@pair',
  // A bare word with a regex character is E@ (Salt's _nodegroup_regex): re.match, so a prefix is enough.
  prefixed: 'db-[a]',
  loop: 'N@webs or N@loop',
}

describe.each(TRANSPORTS)('targeting through the built CLI over %s', (transport) => {
  it('nodegroups from the master config, Python regexes, and a hostile regex refused clearly', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'web1', transport, grains: { role: 'web' } },
        { id: 'web2', transport, grains: { role: 'web' } },
        { id: LONG, transport, grains: { role: 'db' } },
      ],
      masterConfig: { nodegroups },
    })
    const brine = (...args: string[]) => fleet.run('brine', [...args, 'test.ping', '--out', 'json', '--static'])

    expect(json((await brine('-N', 'webs')).stdout)).toEqual({ web1: true, web2: true })
    expect(json((await brine('-N', 'pair')).stdout)).toEqual({ web2: true, [LONG]: true })
    expect(json((await brine('-N', 'listed')).stdout)).toEqual({ web1: true, [LONG]: true })
    expect(json((await brine('-N', 'nested')).stdout)).toEqual({ web1: true })
    expect(json((await brine('-N', 'prefixed')).stdout)).toEqual({ [LONG]: true })
    expect(json((await brine('-C', 'N@pair and G@role:web')).stdout)).toEqual({ web2: true })

    const cycle = await brine('-N', 'loop')
    expect(cycle.stderr).toContain("invalid nodegroup target 'loop': nodegroup 'loop' includes itself (loop → loop)")
    expect(cycle.code).not.toBe(0)

    expect(json((await brine('-E', '(?i)WEB')).stdout)).toEqual({ web1: true, web2: true })
    expect(json((await brine('-E', '(?P<kind>web|db)(\\d|-(?P=kind))')).stdout)).toEqual({ web1: true, web2: true })

    // 2^36 ways to split the a's of the long id: the master stops the match at its deadline and says so.
    const hostile = await brine('-E', 'db-(a+)+!')
    expect(hostile.stdout).toBe('')
    expect(hostile.stderr).toContain(
      "invalid pcre target 'db-(a+)+!': regular expression 'db-(a+)+!' did not finish matching 3 values within 500 ms (catastrophic backtracking?)",
    )
    expect(hostile.code).not.toBe(0)
    const next = await brine('*')
    expect(json(next.stdout)).toEqual({ web1: true, web2: true, [LONG]: true })
    expect(next.code).toBe(0)

    const untranslatable = await brine('-E', '(?i:web)1')
    expect(untranslatable.stderr).toContain("bad regular expression '(?i:web)1': scoped case flags (?i:…) are not supported")
  })
})
