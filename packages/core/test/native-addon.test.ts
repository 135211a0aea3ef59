import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { decode, encode } from '@brine/core'

describe('native addons under the codec', () => {
  it("msgpackr's native string extractor (msgpackr-extract) loads from its prebuilt package, without install scripts", () => {
    const require = createRequire(import.meta.url)
    const extractor = require('msgpackr-extract') as { extractStrings?: unknown }
    expect(typeof extractor.extractStrings).toBe('function')
    // And the codec works on long strings, the path the extractor speeds up.
    const load = { return: 'x'.repeat(10_000), fun: 'cmd.run' }
    expect(decode(encode(load))).toEqual(load)
  })
})
