import { renderOutput, type DisplayOptions } from '../output/index.js'

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * Salt's CLI printing of `sys.doc` (its `_print_docs`): each function's docstring once, from the first
 * minion that had one, sorted by name, as `name:`, the text and a blank line; with `--out`, each as its
 * own nested document. Returns that are not a map of docstrings (an error) are left out. '' when no
 * minion gave any.
 */
export function formatDocs(returns: Readonly<Record<string, unknown>>, outGiven: boolean, display: DisplayOptions): string {
  const docs = new Map<string, unknown>()
  for (const ret of Object.values(returns)) {
    if (!isMap(ret)) continue
    for (const [fun, doc] of Object.entries(ret)) if (!docs.has(fun) && doc !== '' && doc !== null && doc !== undefined) docs.set(fun, doc)
  }
  const names = [...docs.keys()].sort()
  if (outGiven) return names.map((fun) => renderOutput('nested', { [fun]: docs.get(fun) }, display)).join('')
  return names.map((fun) => `${fun}:\n${String(docs.get(fun))}\n\n`).join('')
}
