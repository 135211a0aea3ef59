import { SubsetSizeError } from './errors.js'

/** Salt's default for `cmd_subset` (and salt-api's `local_subset`) when no size is given. */
export const DEFAULT_SUBSET_SIZE = 3

/** A subset size (`--subset`, a `local_subset` chunk's `subset`) as a count of minions, at least 1; `key` names where it came from. */
export function parseSubsetSize(value: unknown, key: string): number {
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : JSON.stringify(value)
  if (!/^\d+$/.test(text ?? '')) throw new SubsetSizeError(String(text), key, 'not a whole number')
  const count = Number(text)
  if (count < 1) throw new SubsetSizeError(text, key, 'at least one minion must be picked')
  return count
}

/**
 * Salt's cmd_subset choice: the minions whose `sys.list_functions` return names `fun`, shuffled, the
 * first `count` of them. A minion whose answer is not a list (an error, an old module) is never picked.
 */
export function pickSubset(functions: Readonly<Record<string, unknown>>, fun: string, count: number, random: () => number = Math.random): string[] {
  const having = Object.keys(functions).filter((id) => {
    const listed = functions[id]
    return Array.isArray(listed) && listed.includes(fun)
  })
  // Fisher–Yates, stopped once the first `count` places are drawn.
  const picks = Math.min(count, having.length)
  for (let index = 0; index < picks; index++) {
    const other = index + Math.floor(random() * (having.length - index))
    ;[having[index], having[other]] = [having[other]!, having[index]!]
  }
  return having.slice(0, picks)
}
