import { existsSync } from 'node:fs'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { expect, inject } from 'vitest'
import { holdFileLock } from './host-lock.js'
import { run } from './processes.js'

/**
 * The installable tarballs `npm run pack` makes, made once per test run and shared by the files that install them
 * (install, deb): the first file to ask packs them into the run's scratch directory while the others wait on its lock.
 */
export async function packedTarballs(ms: number): Promise<string[]> {
  const scratch = inject('runScratch')
  const release = await holdFileLock(join(scratch, 'pack.lock'), ms, 'another test file is packing the tarballs')
  try {
    const list = join(scratch, 'tarballs.txt')
    if (existsSync(list)) return (await readFile(list, 'utf8')).trim().split('\n')
    const packed = await run(process.execPath, ['scripts/pack.mjs', join(scratch, 'tarballs')], { ms })
    expect(packed.code, packed.stderr).toBe(0)
    await writeFile(list, packed.stdout)
    return packed.stdout.trim().split('\n')
  } finally {
    release()
  }
}
