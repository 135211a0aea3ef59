import { defineConfig, type Options } from 'tsup'

/**
 * yaml is bundled into the package that imports it: its Node build is 72 CommonJS files, which every daemon and
 * every `brine` command would otherwise resolve and compile one by one at start. The bundle keeps that build (the
 * same code Node would load), so its `require` of Node's builtins needs a real `require` in the ESM output.
 */
const bundled = ['yaml']
const requireShim = "import { createRequire as __brineCreateRequire } from 'node:module'; const require = __brineCreateRequire(import.meta.url);"

const common: Options = { format: ['esm'], sourcemap: true, target: 'node22', noExternal: bundled }

/**
 * Declarations come from TypeScript's own compiler, not tsup's `dts`: TypeScript 7 (the native compiler) has no
 * JavaScript API, which tsup's declaration bundler needs. One `.d.ts` per source file, beside the bundle.
 */
const emitDeclarations = 'tsc -p tsconfig.json --noEmit false --emitDeclarationOnly --declaration --rootDir src --outDir dist'

/**
 * Every package's build: ESM + .d.ts from `src/index.ts` (plus `extraEntries`, e.g. a worker script started by
 * path), and, for packages with command-line programs, one shebang'd file per bin under `dist/bin/`. `requireShim`:
 * a package whose ESM bundles one of the CommonJS packages above (yaml) gives its modules a real `require`; the others
 * go without, since each module that has one makes it with `createRequire` as it loads (about a millisecond over a
 * command's twenty bundles).
 */
export function packageConfig(options: { extraEntries?: string[]; bins?: Record<string, string>; requireShim?: boolean } = {}) {
  const shim = options.requireShim === true ? requireShim : ''
  const library: Options = {
    ...common,
    entry: ['src/index.ts', ...(options.extraEntries ?? [])],
    clean: true,
    banner: { js: shim },
    onSuccess: emitDeclarations,
  }
  if (options.bins === undefined) return defineConfig(library)
  const bins: Options = {
    ...common,
    entry: Object.fromEntries(Object.entries(options.bins).map(([name, source]) => [`bin/${name}`, source])),
    clean: false,
    banner: { js: `#!/usr/bin/env node\n${shim}` },
  }
  return defineConfig([library, bins])
}
