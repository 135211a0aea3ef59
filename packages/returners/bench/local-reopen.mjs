#!/usr/bin/env node
// Reopening LocalJobCache over a bench-sized log: node packages/returners/bench/local-reopen.mjs [dir] [jobs] [minions] [reopens]
// Bundles src/ with esbuild (no build needed), saves <jobs> test.ping jobs with <minions> returns each (the
// bench's restart phase finds about 260 jobs of 1,000 returns), then reopens the cache <reopens> times, each
// after a clean close (the index persisted) and, alternated, after the persisted index was removed (a full
// scan, as after kill -9); prints the ms and the CPU ms until the index is ready.
import { mkdtemp, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { bundledLocalJobCache } from './bundle-cache.mjs'

const [base = '/tmp', jobsArg = '260', minionsArg = '1000', reopensArg = '3'] = process.argv.slice(2)
const { LocalJobCache, outfile } = await bundledLocalJobCache()
const cachedir = await mkdtemp(join(base, 'brine-reopen-'))
const cpuMs = () => {
  const { user, system } = process.cpuUsage()
  return (user + system) / 1000
}
try {
  const jobs = Number(jobsArg)
  const minions = Number(minionsArg)
  const ids = Array.from({ length: minions }, (_, i) => `swarm-${String(i).padStart(5, '0')}`)
  const cache = await new LocalJobCache({ cachedir }).open()
  const start = Date.UTC(2026, 10, 27, 12) * 1000
  const jids = []
  for (let j = 0; j < jobs; j++) {
    const micros = start + j * 1000
    const d = new Date(Math.floor(micros / 1000))
    const jid =
      d
        .toISOString()
        .replace(/[-:TZ.]/g, '')
        .slice(0, 17) + String(micros % 1000).padStart(3, '0')
    jids.push(jid)
    await cache.saveJob(jid, { fun: 'test.ping', arg: [], tgt: '*', tgt_type: 'glob', jid, user: 'root' }, ids)
    await Promise.all(
      ids.map((id) => cache.saveReturn(jid, id, { cmd: '_return', id, jid, fun: 'test.ping', fun_args: [], return: true, retcode: 0, success: true })),
    )
  }
  await cache.close()
  console.log(`${jobs} jobs x ${minions} returns in ${cachedir}`)
  const reopen = async (label) => {
    const wall = performance.now()
    const cpu = cpuMs()
    const reopened = await new LocalJobCache({ cachedir, indexInBackground: true }).open()
    await reopened.ready()
    const ms = performance.now() - wall
    const used = cpuMs() - cpu
    const job = await reopened.getJob(jids[0])
    const found = Object.keys(job?.returns ?? {}).length
    await reopened.close()
    if (found !== minions) throw new Error(`reopened cache holds ${found} of ${minions} returns of the first job`)
    console.log(`${label}: index ready in ${ms.toFixed(0)} ms, ${used.toFixed(0)} CPU ms`)
  }
  for (let round = 0; round < Number(reopensArg); round++) {
    await reopen('after a clean close')
    await rm(join(cachedir, 'jobs', 'index'), { force: true })
    await reopen('without a persisted index')
  }
} finally {
  await rm(cachedir, { recursive: true, force: true })
  await rm(outfile, { force: true })
}
