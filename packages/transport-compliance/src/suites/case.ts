import { it } from 'vitest'
import type { ComplianceCase } from '../setup.js'

/** Registers one case under its typed name; the title is the part after the group prefix. `timeoutMs` overrides the run's bound. */
export function complianceCase(name: ComplianceCase, fn: () => Promise<void>, timeoutMs?: number): void {
  it(name.slice(name.indexOf(': ') + 2), fn, timeoutMs)
}
