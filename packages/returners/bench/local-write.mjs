#!/usr/bin/env node
// Write throughput of LocalJobCache (fdatasync on): node packages/returners/bench/local-write.mjs [dir] [returns] [concurrency]
// Bundles src/ with esbuild (no build needed), then saves <returns> returns for one jid with
// <concurrency> saveReturn calls in flight (1 = strictly one after another), and prints returns/s;
// then reopens the cache (index rebuilt by scanning the log) and reads the job back, timing both.
import { mkdtemp, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { bundledLocalJobCache } from './bundle-cache.mjs'

const [base = '/tmp', total = '2000', concurrency = '1'] = process.argv.slice(2)
const { LocalJobCache, outfile } = await bundledLocalJobCache()
const cachedir = await mkdtemp(join(base, 'brine-bench-'))
try {
  const cache = await new LocalJobCache({ cachedir }).open()
  const jid = '20240101000000000001'
  const n = Number(total)
  const width = Number(concurrency)
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (let i = next++; i < n; i = next++) {
        const id = `minion-${i}`
        await cache.saveReturn(jid, id, { cmd: '_return', id, jid, fun: 'test.ping', fun_args: [], return: true, retcode: 0, success: true })
      }
    }),
  )
  const seconds = (performance.now() - started) / 1000
  await cache.close()
  console.log(`${n} returns, concurrency ${width}, ${cachedir}: ${(n / seconds).toFixed(0)} returns/s (${((seconds * 1000) / n).toFixed(2)} ms each)`)
  const opening = performance.now()
  const reopened = await new LocalJobCache({ cachedir }).open()
  const opened = performance.now()
  const job = await reopened.getJob(jid)
  const read = performance.now()
  await reopened.close()
  const found = Object.keys(job?.returns ?? {}).length
  if (found !== n) throw new Error(`reopened cache holds ${found} of ${n} returns`)
  console.log(`reopen (scan) ${(opened - opening).toFixed(0)} ms, getJob of ${n} returns ${(read - opened).toFixed(0)} ms`)
} finally {
  await rm(cachedir, { recursive: true, force: true })
  await rm(outfile, { force: true })
}
