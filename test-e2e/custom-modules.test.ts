import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { json } from './helpers/output.js'

const startFleet = useFleets()
const roots: string[] = []
afterAll(async () => {
  for (const root of roots) await rm(root, { recursive: true, force: true })
})

const HELLO = `// A custom execution module as a team would write it: the default export is defineModule's shape.
export default {
  doc: 'Greetings from the master.',
  functions: {
    world: {
      doc: 'Return a greeting naming this minion.\\n\\nCLI Example:\\n\\n    brine "*" hello.world name=you',
      args: ['name'],
      defaults: { name: 'world' },
      run: async ([name], _kwargs, ctx) => \`hello \${name} from \${ctx.id}\`,
    },
  },
}
`
const BROKEN = 'export function oops( {\n'

describe.each(TRANSPORTS)('custom modules from the master over %s', (transport) => {
  it('sync_modules brings _modules/hello.js to every minion without a restart; a broken module is named with its error and the rest still run', async () => {
    const fileRoot = await mkdtemp(join(tmpdir(), 'brine-roots-'))
    roots.push(fileRoot)
    await mkdir(join(fileRoot, '_modules'))
    await writeFile(join(fileRoot, '_modules', 'hello.js'), HELLO)
    const ids = ['mod1', 'mod2']
    const fleet = await startFleet({ minions: ids.map((id) => ({ id, transport })), masterConfig: { file_roots: { base: [fileRoot] } } })
    const pids = ids.map((id) => fleet.minions.get(id)?.pid)
    const brine = async (...args: string[]) => await fleet.run('brine', ['*', ...args, '--out', 'json', '--static', '-t', '60'])

    expect(json((await brine('hello.world')).stdout)).toEqual({ mod1: "'hello.world' is not available.", mod2: "'hello.world' is not available." })
    const synced = await brine('saltutil.sync_modules')
    expect(json(synced.stdout)).toEqual({ mod1: ['modules.hello'], mod2: ['modules.hello'] })
    expect(synced.code).toBe(0)
    expect(json((await brine('hello.world')).stdout)).toEqual({ mod1: 'hello world from mod1', mod2: 'hello world from mod2' })
    expect(json((await brine('hello.world', 'name=brine')).stdout)).toEqual({ mod1: 'hello brine from mod1', mod2: 'hello brine from mod2' })
    const doc = json((await brine('sys.doc', 'hello')).stdout) as Record<string, Record<string, string>>
    expect(doc.mod1?.['hello.world']).toContain('Return a greeting naming this minion.')

    await writeFile(join(fileRoot, '_modules', 'broken.js'), BROKEN)
    const again = await brine('saltutil.sync_modules')
    const reports = json(again.stdout) as Record<string, { synced: string[]; failed: Record<string, string> }>
    for (const id of ids) {
      expect(reports[id]?.synced).toEqual(['modules.broken'])
      expect(reports[id]?.failed.broken).toMatch(/^SyntaxError: /)
    }
    expect(again.code).not.toBe(0)
    expect(json((await brine('hello.world')).stdout)).toEqual({ mod1: 'hello world from mod1', mod2: 'hello world from mod2' })
    const oops = json((await brine('broken.oops')).stdout) as Record<string, string>
    expect(oops.mod1).toContain("'broken.oops' is not available: its module failed to load: SyntaxError")
    expect(json((await brine('test.ping')).stdout)).toEqual({ mod1: true, mod2: true })

    // The same minion processes throughout: loaded without a restart.
    expect(ids.map((id) => fleet.minions.get(id)?.pid)).toEqual(pids)

    // A restarted minion loads what it synced before from extension_modules, without asking the master.
    await fleet.minions.get('mod2')?.stop()
    const mark = fleet.startEventCount
    await fleet.startMinion({ id: 'mod2', transport })
    await fleet.waitForMinionStart('mod2', mark)
    expect(json((await fleet.run('brine', ['mod2', 'hello.world', '--out', 'json', '--static', '-t', '60'])).stdout)).toEqual({ mod2: 'hello world from mod2' })
  })
})
