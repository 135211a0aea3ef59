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

/**
 * A prefix the tarballs of {@link packedTarballs} were installed into as a user installs them (`npm install -g`,
 * --offline, with an empty npm cache), installed once per test run and shared like the tarballs: install runs the
 * installed commands from it and deb builds its package from a copy of its lib/. Neither writes into it.
 */
export async function installedPrefix(ms: number): Promise<string> {
  const tarballs = await packedTarballs(ms)
  const scratch = inject('runScratch')
  const release = await holdFileLock(join(scratch, 'install.lock'), ms, 'another test file is installing the tarballs')
  try {
    const prefix = join(scratch, 'prefix')
    const done = join(scratch, 'prefix.done')
    if (existsSync(done)) return prefix
    // An empty cache and --offline: nothing may come from anywhere but the tarballs.
    const cache = join(scratch, 'empty-npm-cache')
    const installed = await run('npm', ['install', '--global', '--prefix', prefix, '--offline', '--cache', cache, '--no-audit', '--no-fund', ...tarballs], {
      ms,
      cwd: scratch,
    })
    expect(installed.code, installed.stderr).toBe(0)
    await writeFile(done, '')
    return prefix
  } finally {
    release()
  }
}
