import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { jsonOutput, nestedOutput, rawOutput, txtOutput, yamlOutput } from '../src/output/index.js'

/**
 * Salt 3006's text for the same data, made by fixtures/salt-outputs.py with PyYAML's CSafeDumper and
 * Python's json: every quoting rule, line wrap at 80 columns, flow style, escape and colour code.
 */
interface Fixture {
  data: Record<string, unknown>
  yaml: Record<string, string>
  json: Record<string, string>
  nested: string
  nested_color: string
  nested_failed: string
  raw: string
  txt: string
}

const FIXTURES = JSON.parse(readFileSync(new URL('./fixtures/salt-outputs.json', import.meta.url), 'utf8')) as Fixture[]

/** The fixture's key for output_indent: absent, pretty, None (null) or a number. */
const indentOf = (key: string): number | string | null | undefined =>
  key === 'absent' ? undefined : key === 'None' ? null : key === 'pretty' ? 'pretty' : Number(key)

describe.each(FIXTURES.map((fixture, index) => [`${index}: ${JSON.stringify(fixture.data).slice(0, 60)}`, fixture] as const))(
  'Salt text for data set %s',
  (_name, fixture) => {
    it('yaml at every --out-indent', () => {
      for (const [key, text] of Object.entries(fixture.yaml)) expect(yamlOutput(fixture.data, { indent: indentOf(key) }), `output_indent ${key}`).toBe(text)
    })
    it('json at every output_indent, pretty included', () => {
      for (const [key, text] of Object.entries(fixture.json)) expect(jsonOutput(fixture.data, { indent: indentOf(key) }), `output_indent ${key}`).toBe(text)
    })
    it('nested, plain, coloured, and red after a failure', () => {
      expect(nestedOutput(fixture.data)).toBe(fixture.nested)
      expect(nestedOutput(fixture.data, { color: true })).toBe(fixture.nested_color)
      expect(nestedOutput(fixture.data, { color: true, retcode: 1 })).toBe(fixture.nested_failed)
    })
    it('raw and txt', () => {
      expect(rawOutput(fixture.data)).toBe(fixture.raw)
      expect(txtOutput(fixture.data)).toBe(fixture.txt)
    })
  },
)
