#!/usr/bin/env node
// Runs npm scripts side by side and fails if any fails: `npm test` starts lint, build and typecheck together, as
// none needs another's output (the typecheck and the lint read the sources, not dist/). Each script's output is
// held and printed whole when it ends, so two scripts' lines never interleave.
//
//   node scripts/run-parallel.mjs <npm script> [<npm script>...]
import { spawn } from 'node:child_process'

const scripts = process.argv.slice(2)
if (scripts.length === 0) {
  process.stderr.write('usage: node scripts/run-parallel.mjs <npm script> [<npm script>...]\n')
  process.exit(2)
}

/** Runs `npm run <script>`; resolves with its exit code (or 1 for a signal or a spawn failure) once its output is printed. */
function run(script) {
  return new Promise((resolve) => {
    const chunks = []
    const child = spawn('npm', ['run', '--silent', script], { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.on('data', (chunk) => chunks.push({ stream: process.stdout, chunk }))
    child.stderr.on('data', (chunk) => chunks.push({ stream: process.stderr, chunk }))
    const finish = (code, why) => {
      for (const { stream, chunk } of chunks) stream.write(chunk)
      if (code !== 0) process.stderr.write(`npm run ${script} failed (${why})\n`)
      resolve(code)
    }
    child.once('error', (error) => finish(1, error.message))
    child.once('close', (code, signal) => finish(code ?? 1, signal === null ? `exit code ${code}` : `signal ${signal}`))
  })
}

const codes = await Promise.all(scripts.map(run))
process.exit(codes.find((code) => code !== 0) ?? 0)
