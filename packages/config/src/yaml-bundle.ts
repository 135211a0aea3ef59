/**
 * The parts of the `yaml` package this package uses, built into one CommonJS file of their own (`dist/yaml-bundle.cjs`)
 * that {@link yamlModule} loads the first time YAML is read. See yaml-module.ts.
 */
export { LineCounter, isMap, isScalar, parse, parseDocument } from 'yaml'
