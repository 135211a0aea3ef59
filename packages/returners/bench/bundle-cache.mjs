// The bench scripts' LocalJobCache: src/ bundled with esbuild (no build needed) into test/.tmp, then imported.
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { build } from 'esbuild'

const here = fileURLToPath(new URL('.', import.meta.url))
const packages = join(here, '..', '..')

/** LocalJobCache from this package's source; `outfile` is the bundle written (the caller removes it). */
export async function bundledLocalJobCache() {
  const outfile = join(here, '..', 'test', '.tmp', `bench-${process.pid}.mjs`)
  await build({
    stdin: { contents: "export { LocalJobCache } from './src/local-cache.ts'", resolveDir: join(here, '..'), loader: 'ts' },
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
          b.onResolve({ filter: /^@brine\/[a-z-]+$/ }, (a) => ({ path: join(packages, a.path.slice(7), 'src', 'index.ts') }))
          b.onResolve({ filter: /^[^./]/ }, (a) => ({ path: a.path, external: true }))
        },
      },
    ],
  })
  const { LocalJobCache } = await import(pathToFileURL(outfile).href)
  return { LocalJobCache, outfile }
}
