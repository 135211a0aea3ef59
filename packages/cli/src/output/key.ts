import { getColors, stripEscSequence } from './colors.js'
import { comparePython, pythonStr, sortedKeys } from './python.js'

export interface KeyOutputOptions {
  color?: boolean
  stripColors?: boolean
}

const TITLES: Record<
  string,
  [title: string, titleColor: 'LIGHT_GREEN' | 'LIGHT_MAGENTA' | 'LIGHT_RED' | 'LIGHT_BLUE', keyColor: 'GREEN' | 'MAGENTA' | 'RED' | 'BLUE']
> = {
  minions: ['Accepted Keys:', 'LIGHT_GREEN', 'GREEN'],
  minions_denied: ['Denied Keys:', 'LIGHT_MAGENTA', 'MAGENTA'],
  minions_pre: ['Unaccepted Keys:', 'LIGHT_RED', 'RED'],
  minions_rejected: ['Rejected Keys:', 'LIGHT_BLUE', 'BLUE'],
  local: ['Local Keys:', 'LIGHT_MAGENTA', 'MAGENTA'],
  // Brine's own: accepted keys an operator marked as syndics' (brine-key --accept-syndic).
  syndics: ['Syndic Keys:', 'LIGHT_GREEN', 'GREEN'],
}

/** True when every state in `data` is one the key outputter knows (else Salt falls back to nested). */
export function isKeyListing(data: unknown): data is Record<string, string[] | Record<string, unknown>> {
  return typeof data === 'object' && data !== null && !Array.isArray(data) && Object.keys(data).every((state) => Object.hasOwn(TITLES, state))
}

/**
 * Salt's `key` outputter (salt/output/key.py), what salt-key prints: each state's title in sorted
 * order of the state names (Accepted, Denied, Unaccepted, Rejected; Local first), then its ids,
 * sorted; a state holding a mapping prints `id:  value` (fingerprints, public keys).
 */
export function keyOutput(data: Record<string, string[] | Record<string, unknown>>, options: KeyOutputOptions = {}): string {
  const c = getColors(options.color)
  const strip = options.stripColors ?? true
  let out = ''
  for (const state of sortedKeys(data)) {
    const [title, titleColor, keyColor] = TITLES[state] as (typeof TITLES)[string]
    out += `${c[titleColor]}${title}${c.ENDC}\n`
    const entries = data[state] ?? []
    const ids = Array.isArray(entries) ? [...entries].sort(comparePython) : sortedKeys(entries)
    for (const id of ids) {
      const shown = strip ? stripEscSequence(id) : id
      if (Array.isArray(entries)) out += `${c[keyColor]}${shown}${c.ENDC}\n`
      else out += `${c[keyColor]}${shown}:  ${pythonStr(entries[id])}${c.ENDC}\n`
    }
  }
  return out
}
