import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { CONFIG_SCHEMA } from '../src/config-schema.js'

const docs = readFileSync(new URL('../../../docs/config.md', import.meta.url), 'utf8')

/**
 * The keys docs/config.md documents: each backquoted name in the first cell of a table row. `name(_suffix)` names
 * both `name` and `name_suffix`.
 */
function documentedKeys(markdown: string): Set<string> {
  const keys = new Set<string>()
  for (const line of markdown.split('\n')) {
    if (!line.startsWith('| `')) continue
    const firstCell = line.split('|')[1] ?? ''
    for (const [, name, suffix] of firstCell.matchAll(/`([a-z0-9_.]+)(?:\((_[a-z0-9_]+)\))?`/g)) {
      keys.add(name!)
      if (suffix !== undefined) keys.add(`${name}${suffix}`)
    }
  }
  return keys
}

describe('docs/config.md', () => {
  const documented = documentedKeys(docs)
  const schema = Object.keys(CONFIG_SCHEMA)

  it('documents every key of the config schema', () => {
    expect(schema.filter((key) => !documented.has(key))).toEqual([])
  })

  it('documents no key the schema does not have', () => {
    expect([...documented].filter((key) => !schema.includes(key))).toEqual([])
  })
})
