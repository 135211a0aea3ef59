import { defineConfig, type Options } from 'tsup'
import { packageConfig } from '../../tsup.base.js'

const YAML_BUNDLE = 'yaml-bundle'

// The yaml package goes into a CommonJS file of its own, loaded synchronously on first use (src/yaml-module.ts),
// not into the library's bundle: a command whose config comes from the parse cache never loads it. Both builds run at
// once, so the library's clean step leaves that file alone.
const library = packageConfig() as Options
export default defineConfig([
  { ...library, clean: [`!${YAML_BUNDLE}.cjs`, `!${YAML_BUNDLE}.cjs.map`] },
  { entry: { [YAML_BUNDLE]: `src/${YAML_BUNDLE}.ts` }, format: ['cjs'], target: 'node22', sourcemap: true, noExternal: ['yaml'], clean: false },
])
