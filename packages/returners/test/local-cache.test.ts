import { spawn } from 'node:child_process'
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import { describe, expect, it } from 'vitest'
import { LocalJobCache } from '../src/index.js'
import { jidAt, jobCacheContract, ret } from './contract.js'

const here = fileURLToPath(new URL('.', import.meta.url))
const packagesDir = join(here, '..', '..')

async function tempDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'brine-local-cache-'))
}

jobCacheContract('LocalJobCache', async () => {
  const cachedir = await tempDir()
  const cache = await new LocalJobCache({ cachedir }).open()
  return {
    cache,
    another: () => new LocalJobCache({ cachedir }).open(),
    cleanup: async () => {
      await cache.close()
      await rm(cachedir, { recursive: true, force: true })
    },
  }
})

describe('LocalJobCache on disk', () => {
  it('lays jobs out under cachedir/jobs/<day>/<jid> with 0600 files and 0700 directories', async () => {
    const cachedir = await tempDir()
    const cache = await new LocalJobCache({ cachedir }).open()
    try {
      const jid = jidAt('2024-05-06T07:08:09Z', 10)
      await cache.saveJob(jid, { jid, fun: 'test.ping' }, ['m1'])
      await cache.saveReturn(jid, 'm1', ret(jid, 'm1'))
      const dir = join(cachedir, 'jobs', '20240506', jid)
      expect((await readdir(dir)).sort()).toEqual(['load.msgpack', 'minions.msgpack', 'returns'])
      for (const path of [join(cachedir, 'jobs'), join(cachedir, 'jobs', '20240506'), dir, join(dir, 'returns')]) {
        expect((await stat(path)).mode & 0o777).toBe(0o700)
      }
      for (const path of [join(dir, 'load.msgpack'), join(dir, 'returns', 'm1')]) expect((await stat(path)).mode & 0o777).toBe(0o600)
      // No temp file is left behind once a save has resolved.
      expect(await readdir(join(cachedir, 'jobs', '.tmp'))).toEqual([])
    } finally {
      await cache.close()
      await rm(cachedir, { recursive: true, force: true })
    }
  })

  it('rejects minion ids and jids that could escape the directory, writing nothing', async () => {
    const cachedir = await tempDir()
    const cache = await new LocalJobCache({ cachedir }).open()
    try {
      const jid = jidAt('2024-05-06T07:08:09Z', 11)
      await expect(cache.saveReturn(jid, '../../evil', ret(jid, '../../evil'))).rejects.toMatchObject({ name: 'InvalidMinionIdError' })
      await expect(cache.saveReturn('20240506070809000011_/../x', 'm', ret(jid, 'm'))).rejects.toMatchObject({ name: 'JobCacheError' })
      await expect(cache.saveJob('not-a-jid', {}, [])).rejects.toMatchObject({ name: 'JobCacheError' })
      expect((await readdir(join(cachedir, 'jobs'))).sort()).toEqual(['.tmp'])
    } finally {
      await cache.close()
      await rm(cachedir, { recursive: true, force: true })
    }
  })

  it('keeps every acknowledged return when the writing process is killed with SIGKILL', async () => {
    // The child runs the package's TypeScript source, bundled with esbuild (@brine/* from src/, npm
    // packages external), so the test needs no prior build. The bundle sits inside the repo so node
    // finds node_modules from it.
    const outdir = join(here, '.tmp')
    const outfile = join(outdir, `writer-${process.pid}.mjs`)
    await build({
      entryPoints: [join(here, 'fixtures', 'writer.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outfile,
      logLevel: 'silent',
      plugins: [
        {
          name: 'brine-src',
          setup(b) {
            b.onResolve({ filter: /^@brine\/[a-z-]+$/ }, (args) => ({ path: join(packagesDir, args.path.slice('@brine/'.length), 'src', 'index.ts') }))
            b.onResolve({ filter: /^[^./]/ }, (args) => ({ path: args.path, external: true }))
          },
        },
      ],
    })
    const cachedir = await tempDir()
    const jid = jidAt('2024-06-01T00:00:00Z', 1)
    const child = spawn(process.execPath, [outfile, cachedir, jid], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)))
    const acked: string[] = []
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out after 30 s waiting for 200 "acked" lines from the writer (got ${acked.length}); stderr: ${stderr}`)), 30_000)
        void exited.then(() => reject(new Error(`writer exited early; stderr: ${stderr}`)))
        createInterface({ input: child.stdout }).on('line', (line) => {
          if (line.startsWith('acked ')) acked.push(line.slice('acked '.length))
          if (acked.length === 200) {
            clearTimeout(timer)
            child.kill('SIGKILL') // mid-stream: more saves are in flight
            resolve()
          }
        })
      })
      expect(await exited).toBe('SIGKILL')
      const cache = await new LocalJobCache({ cachedir }).open()
      const job = await cache.getJob(jid)
      await cache.close()
      for (const id of acked) expect(job?.returns[id]?.return, `acked return ${id}`).toBe(id)
      expect(Object.keys(job?.returns ?? {}).length).toBeGreaterThanOrEqual(acked.length)
    } finally {
      child.kill('SIGKILL')
      await rm(outfile, { force: true })
      await rm(cachedir, { recursive: true, force: true })
    }
  })
})
