import { copyFileSync, mkdirSync, statSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { defineConfig, type Options } from 'tsup'
import { packageConfig } from '../../tsup.base.js'

const BINS = ['brine', 'brine-master', 'brine-minion', 'brine-syndic', 'brine-key', 'brine-call', 'brine-run', 'brine-api']

/** The short-lived commands also built as one CommonJS file each (bin/bundle.js runs it when it is current). */
const BUNDLED = ['brine', 'brine-run', 'brine-key']

/**
 * The minion daemon's own one-file build. Built apart from the commands' because it leaves out the packages of the other
 * daemons that the daemon command's module names (brine-minion never loads them): in the file, they would be source an
 * idle minion holds in memory for as long as it runs.
 */
const MINION_BUNDLE_EXTERNAL = ['@brine/master', '@brine/syndic']

/**
 * What a bundle leaves to Node: yaml (loaded only to parse a changed config, from the copy of @brine/config's one-file
 * build put beside the bundle) and cli-progress (only on a terminal), both dependencies of this package; msgpackr's
 * native extractor, which the commands do not load; and Node's `readline/promises`, which this esbuild does not know
 * for a builtin.
 */
const BUNDLE_EXTERNAL = ['yaml', 'cli-progress', 'msgpackr-extract', 'readline/promises']
const YAML_BUNDLE = '../config/dist/yaml-bundle.cjs'

/**
 * Writes `dist/bundle/<name>.json` beside each bundle: when it was built and the size of each file of the other
 * workspace packages it inlined (paths from this package's root), which the launcher compares with the files it
 * finds there before it runs the bundle (bin/bundle.js); and copies @brine/config's yaml build beside it.
 */
const bundleManifest = (names: readonly string[]) => ({
  name: 'brine-bundle-manifest',
  setup(build: {
    initialOptions: { metafile?: boolean }
    onEnd: (callback: (result: { metafile?: { inputs: Record<string, unknown>; outputs: Record<string, { entryPoint?: string }> } }) => void) => void
  }) {
    build.initialOptions.metafile = true
    build.onEnd((result) => {
      if (result.metafile === undefined) return
      const sibling = (file: string): boolean => file.startsWith('../') && !file.startsWith('../../')
      const inputs = [...Object.keys(result.metafile.inputs).filter(sibling), YAML_BUNDLE]
      const files = Object.fromEntries(inputs.map((file) => [file, statSync(file).size]))
      mkdirSync('dist/bundle', { recursive: true })
      copyFileSync(YAML_BUNDLE, 'dist/bundle/yaml-bundle.cjs')
      const builtAt = Date.now()
      for (const name of names) writeFileSync(`dist/bundle/${name}.json`, `${JSON.stringify({ builtAt, files }, null, 1)}\n`)
    })
  },
})

type EsbuildPlugin = NonNullable<Options['esbuildPlugins']>[number]

/**
 * Gives the NATS client (@nats-io/transport-node) src/bundle/lazy-tls.ts for its `node:tls`: the client requires it as it
 * loads, and a minion on a broker without TLS would hold Node's tls module for nothing.
 */
const lazyTlsForNats: EsbuildPlugin = {
  name: 'brine-lazy-tls-for-nats',
  setup(build) {
    build.onResolve({ filter: /^(node:)?tls$/ }, (args) =>
      args.importer.includes('/@nats-io/transport-node/') ? { path: fileURLToPath(new URL('src/bundle/lazy-tls.ts', import.meta.url)) } : undefined,
    )
  },
}

/** The one-file build of the commands `names`, leaving `external` (beyond {@link BUNDLE_EXTERNAL}) to Node. */
const bundles = (names: readonly string[], external: readonly string[] = [], plugins: readonly EsbuildPlugin[] = []): Options => ({
  // tsup's own resolution of `node:` imports would come before the plugins' (lazyTlsForNats); esbuild leaves Node's
  // modules to Node either way.
  ...(plugins.length === 0 ? {} : { removeNodeProtocol: false }),
  entry: Object.fromEntries(names.map((name) => [`bundle/${name}`, `src/bundle/${name}.ts`])),
  format: ['cjs'],
  target: 'node22',
  platform: 'node',
  sourcemap: true,
  clean: false,
  splitting: false,
  // A smaller source is less to read and hash at each start; names are kept, so stacks still read.
  minifyWhitespace: true,
  minifySyntax: true,
  shims: true,
  // Everything but `external` is inlined (noExternal wins over external in tsup, so it names the exceptions too).
  noExternal: [new RegExp(`^(?!(?:${external.map((name) => name.replace('/', '\\/')).join('|')})$)`)],
  external: [...BUNDLE_EXTERNAL, ...external],
  esbuildPlugins: [bundleManifest(names), ...plugins],
  // The packages' bare `import '@brine/core'` lines (kept by their own builds) are dropped here as they should be.
  esbuildOptions(options) {
    options.logOverride = { 'ignored-bare-import': 'silent' }
  },
})

// One file per bin, each runnable as `node dist/bin/brine.js` or through package.json "bin"; `dist/compile-cache.js`
// for the launcher, which turns the cache on before it loads a bundle.
const [library, bins] = packageConfig({
  extraEntries: ['src/compile-cache.ts'],
  bins: Object.fromEntries(BINS.map((bin) => [bin, `src/bin/${bin}.ts`])),
}) as Options[]
export default defineConfig([
  { ...library!, clean: ['!bundle/**'] },
  bins!,
  bundles(BUNDLED),
  bundles(['brine-minion'], MINION_BUNDLE_EXTERNAL, [lazyTlsForNats]),
])
