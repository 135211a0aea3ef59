import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ModuleSyncSource } from '../src/module-sync.js'

const root = mkdtempSync(join(tmpdir(), 'brine-modsync-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const sha = (text: string): string => createHash('sha256').update(text).digest('hex')

function tree(): { first: string; second: string } {
  const first = join(root, 'first')
  const second = join(root, 'second')
  for (const dir of [first, second]) mkdirSync(join(dir, '_modules'), { recursive: true })
  writeFileSync(join(first, '_modules', 'hello.js'), 'export const a = 1')
  writeFileSync(join(second, '_modules', 'hello.js'), 'shadowed')
  writeFileSync(join(second, '_modules', 'other.mjs'), 'export const b = 2')
  writeFileSync(join(second, '_modules', 'not-an-identifier.js'), 'x')
  writeFileSync(join(second, '_modules', 'big.js'), 'x'.repeat(2048))
  writeFileSync(join(root, 'secret.js'), 'outside the roots')
  symlinkSync(join(root, 'secret.js'), join(first, '_modules', 'escape.js'))
  writeFileSync(join(first, 'top.js'), 'not under _modules')
  return { first, second }
}

describe('ModuleSyncSource: _modules/ of file_roots for saltutil.sync_modules', () => {
  const { first, second } = tree()
  const source = new ModuleSyncSource({ base: [first, second], dev: second }, { maxFileBytes: 1024 })

  it('lists identifier-named .js/.mjs files, the first root winning, never a symlink out of _modules, and bounds sizes', async () => {
    const answer = await source.answer({ saltenv: 'base' })
    expect(answer.modules.map((entry) => entry.name)).toEqual(['big', 'hello', 'other'])
    expect(answer.modules[0]?.data).toBeUndefined()
    expect(answer.modules[1]).toMatchObject({ name: 'hello', hash: sha('export const a = 1'), size: 18 })
    expect(new TextDecoder().decode(answer.modules[1]?.data)).toBe('export const a = 1')
    expect(answer.skipped).toEqual(['big: 2048 bytes, more than 1024'])
  })

  it('sends no text for a module the minion holds already, and reads only the environment asked for', async () => {
    const answer = await source.answer({ saltenv: 'base', have: { hello: sha('export const a = 1') } })
    expect(answer.modules[1]?.data).toBeUndefined()
    expect(answer.modules[2]?.data).toBeDefined()
    expect((await source.answer({ saltenv: 'dev' })).modules.map((entry) => entry.name)).toEqual(['big', 'hello', 'other'])
    expect((await source.answer({ saltenv: 'prod' })).modules).toEqual([])
  })

  it('refuses a malformed saltenv or have with a typed error', async () => {
    await expect(source.answer({ saltenv: '../etc' })).rejects.toMatchObject({ name: 'MalformedRequestError', message: expect.stringContaining('saltenv') })
    await expect(source.answer({ have: ['hello'] })).rejects.toMatchObject({ name: 'MalformedRequestError', message: expect.stringContaining("'have'") })
  })

  it('stops at the total bound, saying which modules to sync again for', async () => {
    const small = new ModuleSyncSource({ base: [first, second] }, { maxTotalBytes: 20 })
    const answer = await small.answer({})
    expect(answer.modules.filter((entry) => entry.data !== undefined).map((entry) => entry.name)).toEqual(['hello'])
    expect(answer.skipped).toEqual(expect.arrayContaining([expect.stringContaining('other: the answer would pass 20 bytes')]))
  })
})
