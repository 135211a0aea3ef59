import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { RunResult } from '@brine/testkit'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'

const startFleet = useFleets()

/** The `--out json` documents among Salt's batch lines, in order. */
function jsonDocuments(stdout: string): Array<Record<string, unknown>> {
  return stdout
    .split(/^(?=\{$)/m)
    .filter((part) => part.startsWith('{'))
    .map((part) => JSON.parse(part.slice(0, part.indexOf('\n}') + 2)) as Record<string, unknown>)
}

/** The minion lists of Salt's "Executing run on [...]" lines, in order. */
function batchesOf(stdout: string): string[] {
  return [...stdout.matchAll(/^Executing run on \[(.*)\]$/gm)].map((match) => match[1]!)
}

describe.each(TRANSPORTS)('brine batch mode against real minions over %s', (transport) => {
  it('-b 1 and -b 50% over 4 minions with one offline; --failhard stops at the first failure; batch_safe_limit switches to batch', async () => {
    const ids = ['m1', 'm2', 'm3', 'm4']
    const fleet = await startFleet({ minions: ids.map((id) => ({ id, transport })), masterConfig: { gather_job_timeout: 1 } })
    expect((await fleet.minions.get('m4')!.stop('SIGTERM')).code).toBe(0)

    // Each run starts with a ping that waits -t and a find_job round for the offline m4. The runs do not touch each
    // other, so they go side by side and those waits overlap; the two mkdir runs share a directory and go one after the other.
    const lock = join(fleet.root, 'batch-lock')
    const mkdirRuns = async (): Promise<[RunResult, RunResult]> => {
      // --failhard: the first minion to run creates the directory; the second fails to, and the run stops there.
      const hard = await fleet.run('brine', ['*', 'cmd.run', `mkdir ${lock}`, '-b', '1', '-t', '1', '--failhard', '--hide-timeout'])
      // Without it, every minion runs.
      const soft = await fleet.run('brine', ['*', 'cmd.run', `mkdir ${lock}`, '-b', '1', '-t', '1', '--hide-timeout'])
      return [hard, soft]
    }
    const [one, half, hidden, safe, unsafe, [hard, soft]] = await Promise.all([
      fleet.run('brine', ['*', 'test.arg', 'hello', '-b', '1', '-t', '1', '--out', 'json']),
      fleet.run('brine', ['*', 'test.ping', '-b', '50%', '-t', '1']),
      fleet.run('brine', ['*', 'test.ping', '-b', '2', '-t', '1', '--hide-timeout']),
      fleet.run('brine', ['*', 'test.ping', '-t', '1', '--batch-safe-limit', '3', '--batch-safe-size', '2']),
      fleet.run('brine', ['m1', 'test.ping', '--batch-safe-limit', '3']),
      mkdirRuns(),
    ])

    // -b 1: the ping finds m4 silent (no job for it), then one minion at a time, each its own job.
    expect(one.stdout).toContain('Minion m4 did not respond. No job will be sent.\n')
    expect(batchesOf(one.stdout)).toEqual(["'m1'", "'m2'", "'m3'"])
    const documents = jsonDocuments(one.stdout)
    expect(documents.map((document) => Object.keys(document))).toEqual([
      ['retcode', 'jid', 'm1'],
      ['retcode', 'jid', 'm2'],
      ['retcode', 'jid', 'm3'],
    ])
    expect(documents.map((document) => document['retcode'])).toEqual([0, 0, 0])
    expect(documents[0]!['m1']).toEqual({ args: ['hello'], kwargs: {} })
    const jids = documents.map((document) => document['jid'])
    expect(new Set(jids).size).toBe(3)
    for (const jid of jids) expect(jid).toMatch(/^\d{20}$/)
    // m4 got no job, and did not answer: not a success, so not exit 0 (Salt would say 0).
    expect(one.code).toBe(1)

    // Each batch was published as a list target under its jid.
    const lookup = await fleet.run('brine-run', ['jobs.list_job', String(jids[1]), '--out', 'json'])
    expect(JSON.parse(lookup.stdout)).toMatchObject({ Function: 'test.arg', Target: ['m2'], 'Target-type': 'list', Minions: ['m2'] })

    // -b 50%: half of the 3 that answered is 1.5, which Salt rounds down to 1.
    expect(batchesOf(half.stdout)).toEqual(["'m1'", "'m2'", "'m3'"])
    expect(half.stdout).toMatch(/^jid:\n {4}\d{20}\nm2:\n {4}True\nretcode:\n {4}0$/m)
    expect(half.code).toBe(1)
    expect(hidden.stdout).not.toContain('m4')
    expect(batchesOf(hidden.stdout)[0]).toBe("'m1', 'm2'")
    expect(hidden.code).toBe(0)

    // --failhard stopped at m2, which found the directory m1 had made.
    expect(batchesOf(hard.stdout)).toEqual(["'m1'", "'m2'"])
    expect(hard.stdout).toMatch(/^m2:\n {4}mkdir: .*File exists/m)
    expect(hard.stderr).toContain("ERROR: Minion m2 returned with non-zero exit code. Batch run stopped due to failhard; not sent to ['m3']")
    expect(hard.code).toBe(1)
    // Without it, every minion ran.
    expect(batchesOf(soft.stdout)).toEqual(["'m1'", "'m2'", "'m3'"])
    expect(soft.code).toBe(1)

    // batch_safe_limit: 4 targeted minions reach a limit of 3, so the run goes in batches of 2.
    expect(safe.stdout).toMatch(/^\nNOTICE: Too many minions targeted, switching to batch execution.\nMinion m4 did not respond/)
    expect(batchesOf(safe.stdout)[0]).toBe("'m1', 'm2'")
    expect(unsafe.stdout).toBe('m1:\n    True\n')
    expect(unsafe.code).toBe(0)
  })
})
