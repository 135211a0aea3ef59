import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { TRANSPORTS, useFleets, useSharedFleets } from './helpers/fleets.js'

const startFleet = useFleets()

describe.each(TRANSPORTS)('the brine CLI against real daemons over %s', (transport) => {
  // The second and third tests share a master and its minions: the second calls web1 alone, and the third, which
  // rejects db1's key, runs after it.
  const startShared = useSharedFleets()
  let shared: ReturnType<typeof startShared> | undefined
  const webAndDb = (): ReturnType<typeof startShared> =>
    (shared ??= startShared({
      minions: [
        { id: 'web1', transport },
        { id: 'db1', transport },
      ],
    }))

  it('reports a stopped minion as not returning (after find_job), and exits non-zero like Salt', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'web1', transport },
        { id: 'db1', transport },
      ],
      masterConfig: { gather_job_timeout: 1 },
    })
    expect(fleet.master.stderr).toContain('worker_threads: 2 worker threads')
    const stopped = await fleet.minions.get('db1')!.stop('SIGTERM')
    expect(stopped.code).toBe(0)
    // Both wait out db1 (-t, then a find_job round): side by side, the waits overlap.
    const [result, hidden] = await Promise.all([
      fleet.run('brine', ['*', 'test.ping', '-t', '1', '-v']),
      fleet.run('brine', ['*', 'test.ping', '-t', '1', '--hide-timeout', '--out', 'json', '--static']),
    ])
    expect(result.stdout).toMatch(/Executing job with jid \d{20}/)
    expect(result.stdout).toContain('web1:\n    True\n')
    expect(result.stdout).toContain('db1:\n    Minion did not return. [No response]')
    expect(result.code).toBe(1)

    expect(JSON.parse(hidden.stdout)).toEqual({ web1: true })
  })

  it('prints the jid with --async and --show-jid, and fails clearly on bad functions and commands', async () => {
    const fleet = await webAndDb()
    const asynchronous = await fleet.run('brine', ['web1', 'test.sleep', '1', '--async'])
    expect(asynchronous.stdout).toMatch(/^Executed command with job ID: \d{20}\n$/)
    expect(asynchronous.code).toBe(0)

    const shown = await fleet.run('brine', ['web1', 'test.echo', 'hi', '--show-jid'])
    expect(shown.stdout).toMatch(/^jid: \d{20}\nweb1:\n    hi\n$/)

    const missing = await fleet.run('brine', ['web1', 'test.nosuch'])
    expect(missing.stdout).toContain("'test.nosuch' is not available.")
    expect(missing.code).toBe(1)

    const failing = await fleet.run('brine', ['web1', 'cmd.run', 'echo oops >&2; exit 3'])
    expect(failing.stdout).toBe('web1:\n    oops\n')
    expect(failing.stderr).toContain('ERROR: Minions returned with non-zero exit code')
    expect(failing.code).toBe(1)

    const badFlag = await fleet.run('brine', ['web1', 'test.ping', '--out', 'xml'])
    expect(badFlag.code).toBe(64)
    expect(badFlag.stderr).toMatch(/--out/)

    // Salt's --subset (sys.list_functions asked first), --summary and --out-file, and -d's docstrings, from the built command.
    const file = join(fleet.root, 'subset-returns.txt')
    const [subset, docs, preview] = await Promise.all([
      fleet.run('brine', ['--subset', '1', '--summary', '--out-file', file, '*', 'test.ping']),
      fleet.run('brine', ['-d', 'web1', 'test.ping']),
      fleet.run('brine', ['--preview-target', '-L', 'web1,ghost,db1', 'test.ping']),
    ])
    // Salt's --preview-target: the accepted minions the target selects, as a nested list; nothing runs.
    expect(preview.stdout).toBe('- db1\n- web1\n')
    expect(preview.code).toBe(0)
    expect(subset.code).toBe(0)
    expect(subset.stdout).toMatch(/\n# of minions targeted: 1\n# of minions returned: 1\n# of minions that did not return: 0\n/)
    expect(await readFile(file, 'utf8')).toMatch(/^(web1|db1):\n    True\n$/)
    expect(docs.stdout).toMatch(/^test\.ping:\n\S[^]*\n\n$/)
    expect(docs.code).toBe(0)

    // Salt's --metadata: kept with the job, echoed by the minion, found again by jobs.list_jobs search_metadata.
    const tagged = await fleet.run('brine', ['--metadata', '{ticket: t-8}', '--show-jid', 'web1', 'test.ping'])
    expect(tagged.code).toBe(0)
    const jid = /^jid: (\d{20})\n/.exec(tagged.stdout)?.[1]
    const found = await fleet.run('brine-run', ['--out', 'json', 'jobs.list_jobs', 'search_metadata={ticket: t-8}'])
    expect(JSON.parse(found.stdout)).toEqual({ [jid!]: expect.objectContaining({ Function: 'test.ping', Metadata: { ticket: 't-8' } }) })
  })

  it('brine, brine-run and brine-key print and exit the same from their one-file builds as from their modules (what a stale or missing build falls back to)', async () => {
    const fleet = await webAndDb()
    const modules = { ...process.env, BRINE_DISABLE_BUNDLE: '1' }
    for (const [bin, args] of [
      ['brine', ['web1', 'test.ping']],
      ['brine', ['web1', 'test.echo', 'hi', '--out', 'json']],
      ['brine', ['web1', 'test.nosuch']],
      ['brine', ['web1', 'cmd.run', 'echo oops >&2; exit 3']],
      ['brine', ['nosuchminion', 'test.ping']],
      ['brine', ['web1', 'test.ping', '--out', 'xml']],
      ['brine-run', ['manage.status', '--out', 'json']],
      ['brine-run', ['jobs.nosuch']],
      ['brine-key', ['-L', '--out', 'json']],
      ['brine-key', ['-f', 'web1']],
      ['brine-key', ['-d', 'nosuchminion', '-y']],
    ] as const) {
      const bundled = await fleet.run(bin, [...args])
      const fromModules = await fleet.run(bin, [...args], { env: modules })
      expect({ bin, args, code: bundled.code, stdout: bundled.stdout, stderr: bundled.stderr }).toEqual({
        bin,
        args,
        code: fromModules.code,
        stdout: fromModules.stdout,
        stderr: fromModules.stderr,
      })
    }
  })

  it('rejecting an accepted key rotates the session and cuts the minion off', async () => {
    const fleet = await webAndDb()
    const rejected = await fleet.run('brine-key', ['-r', 'db1', '--include-accepted', '-y'])
    expect(rejected.code).toBe(0)
    const after = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(JSON.parse(after.stdout)).toEqual({ web1: true })
    const listed = await fleet.run('brine-key', ['-L'])
    expect(listed.stdout).toMatch(/Accepted Keys:\nweb1\n/)
    expect(listed.stdout).toMatch(/Rejected Keys:\ndb1\n/)
    // brine-call as db1 cannot authenticate now, and says so at once, as Salt's salt-call does (exit 2).
    const refused = await fleet.run('brine-call', ['test.ping'], { configDir: fleet.minionConfigDir('db1') })
    expect(refused.stderr).toMatch(/^brine-call: Minion failed to authenticate with the master \S+: its key was refused/m)
    expect([refused.stdout, refused.code]).toEqual(['', 2])
  })
})

describe('brine-call --local and daemon shutdown', () => {
  it('runs a module on the minion host without a master, and daemons exit 0 on SIGTERM', async () => {
    const fleet = await startFleet({ minions: [{ id: 'web1', transport: 'tcp' }] })
    const ping = await fleet.run('brine-call', ['--local', 'test.ping'], { configDir: fleet.minionConfigDir('web1') })
    expect(ping.stdout).toBe('local:\n    True\n')
    expect(ping.code).toBe(0)
    const failing = await fleet.run('brine-call', ['--local', 'cmd.retcode', 'exit 4'], { configDir: fleet.minionConfigDir('web1') })
    expect(failing.stdout).toBe('local:\n    4\n')
    expect(failing.code).toBe(4)
    expect(await fleet.minions.get('web1')!.stop('SIGTERM')).toEqual({ code: 0, signal: null })
    expect(await fleet.master.stop('SIGINT')).toEqual({ code: 0, signal: null })
  })
})
