import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { TRANSPORTS, useFleets, useSharedFleets } from './helpers/fleets.js'

// The file's teardown: every process the test kit started is killed by pid after the file.
useFleets()

/** Salt 3006's text for the data test.arg returns below (packages/cli/test/fixtures, made with PyYAML and Python's json). */
interface Fixture {
  data: unknown
  yaml: Record<string, string>
  json: Record<string, string>
}
const TEST_ARG = { web1: { args: [1, 2.5, true, null, [1, 2], { a: 1 }, 755], kwargs: { mode: 755 } } }

async function saltText(): Promise<Fixture> {
  const fixtures = JSON.parse(await readFile(new URL('../packages/cli/test/fixtures/salt-outputs.json', import.meta.url), 'utf8')) as Fixture[]
  const fixture = fixtures.find((candidate) => JSON.stringify(candidate.data) === JSON.stringify(TEST_ARG))
  if (fixture === undefined) throw new Error('the salt-outputs fixtures lost the test.arg data set')
  return fixture
}

const ARGS = ['1', '2.5', 'True', 'None', '[1,2]', '{a: 1}', '0755', 'mode=0755']

const NESTED = [
  'web1:',
  '    ----------',
  '    args:',
  '        - 1',
  '        - 2.5',
  '        - True',
  '        - None',
  '        |_',
  '          - 1',
  '          - 2',
  '        |_',
  '          ----------',
  '          a:',
  '              1',
  '        - 755',
  '    kwargs:',
  '        ----------',
  '        mode:',
  '            755',
  '',
].join('\n')

describe.each(TRANSPORTS)('Salt parity through the built CLI against a real minion over %s', (transport) => {
  // One master and its two minions for both tests: neither stops a daemon; the first lists the keys as they are, the
  // second calls web1 alone and then adds master.d/output.conf, which changes every later output of that master.
  const startShared = useSharedFleets()
  let shared: ReturnType<typeof startShared> | undefined
  const webAndDb = (): ReturnType<typeof startShared> =>
    (shared ??= startShared({
      minions: [
        { id: 'web1', transport },
        { id: 'db1', transport },
      ],
    }))

  it('brine-key -L --out json and -p as salt-key prints them, and usage errors exit 64', async () => {
    const fleet = await webAndDb()
    const listed = await fleet.run('brine-key', ['-L', '--out', 'json'])
    expect(listed.stdout).toBe(
      '{\n    "minions": [\n        "db1",\n        "web1"\n    ],\n    "minions_pre": [],\n    "minions_rejected": [],\n    "minions_denied": []\n}\n',
    )
    expect(listed.code).toBe(0)
    const printed = await fleet.run('brine-key', ['-p', 'web1', '--out', 'json'])
    const pub = JSON.parse(printed.stdout) as { minions: { web1: string } }
    // The master prints the public key the minion generated (root_dir-prefixed pki_dir).
    expect(pub.minions.web1).toBe(await readFile(join(fleet.minionConfigDir('web1'), 'etc/brine/pki/minion/minion.pub'), 'utf8'))

    const nothing = await fleet.run('brine-key', ['-d', 'nobody', '-y'])
    expect(nothing).toMatchObject({ code: 0, stdout: "The key glob 'nobody' does not match any unaccepted keys.\n" })

    const badList = await fleet.run('brine-key', ['-l', 'sideways'])
    expect(badList.code).toBe(64)
    expect(badList.stderr).toBe("Usage: brine-key [options]\n\nbrine-key: error: 'sideways' is not a valid argument to '--list'\n")
    const badFlag = await fleet.run('brine', ['--bogus', '*', 'test.ping'])
    expect(badFlag.code).toBe(64)
    expect(badFlag.stderr).toMatch(/^Usage: brine \[options\]/)
  })

  it("types arguments as Salt does and prints Salt's nested, yaml and json text", async () => {
    const fleet = await webAndDb()
    const salt = await saltText()

    const nested = await fleet.run('brine', ['web1', 'test.arg', ...ARGS])
    expect(nested.stdout).toBe(NESTED)
    expect(nested.code).toBe(0)

    expect((await fleet.run('brine', ['web1', 'test.arg', ...ARGS, '--out', 'yaml'])).stdout).toBe(salt.yaml['absent'])
    expect((await fleet.run('brine', ['web1', 'test.arg', ...ARGS, '--out', 'yaml', '--out-indent', '-1'])).stdout).toBe(salt.yaml['-1'])
    expect((await fleet.run('brine', ['web1', 'test.arg', ...ARGS, '--out', 'json'])).stdout).toBe(`${salt.json['absent']}\n`)
    expect((await fleet.run('brine', ['web1', 'test.arg', ...ARGS, '--out', 'json', '--out-indent', '-1'])).stdout).toBe(`${salt.json['-1']}\n`)

    // output_indent: pretty in the master config sorts the keys, as Salt's json outputter does.
    await mkdir(join(fleet.masterConfigDir, 'master.d'), { recursive: true })
    await writeFile(join(fleet.masterConfigDir, 'master.d', 'output.conf'), 'output_indent: pretty\n')
    const pretty = await fleet.run('brine', ['web1', 'test.arg', ...ARGS, '--out', 'json'])
    expect(pretty.stdout).toBe(`${salt.json['pretty']}\n`)
    expect(pretty.stderr).toBe('')

    // salt-call types its words the same way.
    const local = await fleet.run('brine-call', ['--local', '--out', 'json', '--out-indent', '-1', 'test.arg', ...ARGS], {
      configDir: fleet.minionConfigDir('web1'),
    })
    expect(local.stdout).toBe('{"local": {"args": [1, 2.5, true, null, [1, 2], {"a": 1}, 755], "kwargs": {"mode": 755}}}\n')
  })
})
