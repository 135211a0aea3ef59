#!/usr/bin/env node
// Writes scripts/test-durations.json, the seconds each test file took in this clone's last vitest runs (vitest's own
// cache), which scripts/vitest-sequencer.ts reads on a clone that has no cache yet. Run it after a full `npm test`
// on a quiet machine when files were added, split or made much faster or slower; or name the results.json files
// (another clone's cache) to read instead.
//
//   node scripts/test-durations.mjs [results.json...]
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const cacheDir = join(root, 'node_modules/.vite/vitest')
const named = process.argv.slice(2)
const sources =
  named.length > 0
    ? named
    : readdirSync(cacheDir, { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => join(cacheDir, entry.name, 'results.json'))
const durations = {}
for (const source of sources) {
  const results = JSON.parse(readFileSync(source, 'utf8'))
  for (const project of Object.values(results.projects)) {
    for (const [file, result] of Object.entries(project.files)) {
      if (existsSync(join(root, file))) durations[file] = Math.round(result.duration / 100) / 10
    }
  }
}
const sorted = Object.fromEntries(Object.entries(durations).sort(([a], [b]) => (a < b ? -1 : 1)))
writeFileSync(join(root, 'scripts/test-durations.json'), `${JSON.stringify(sorted, null, 2)}\n`)
console.log(`scripts/test-durations.json: ${Object.keys(sorted).length} files`)
