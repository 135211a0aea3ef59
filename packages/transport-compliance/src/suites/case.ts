import { it } from 'vitest'
import type { ComplianceCase } from '../setup.js'

/** Registers one case under its typed name; the title is the part after the group prefix. */
export function complianceCase(name: ComplianceCase, fn: () => Promise<void>): void {
  it(name.slice(name.indexOf(': ') + 2), fn)
}
