import { loadSaltYaml } from '@brine/config'
import { ReactionError } from '../errors.js'

/** What a reaction file may refer to: the event that triggered it. */
export interface ReactionEvent {
  tag: string
  data: Record<string, unknown>
}

/** `{{ tag }}`, `{{ data }}`, `{{ data.a.b }}`, `{{ data['a']["b"][0] }}`: a reference, never an expression. */
const REFERENCE = /\{\{\s*([^{}]*?)\s*\}\}/g
const ROOT = /^(tag|data)/
const SEGMENT = /^(?:\.([A-Za-z_][\w-]*)|\[\s*'([^']*)'\s*\]|\[\s*"([^"]*)"\s*\]|\[\s*(\d+)\s*\])/
/** The placeholder each reference stands as while the YAML is parsed: a plain word, valid unquoted anywhere. */
const placeholder = (index: number): string => `__brine_ref_${index}__`
const PLACEHOLDER = /__brine_ref_(\d+)__/g
const MAX_REFERENCES = 1000

/** A reference's path: its root and the keys under it. */
function parseReference(file: string, text: string): string[] {
  const root = ROOT.exec(text)
  if (root === null)
    throw new ReactionError(
      file,
      `{{ ${text.slice(0, 80)} }} is not a reference: only tag, data and data.key / data['key'] / data[0] paths are substituted (no Jinja)`,
    )
  const path = [root[1]!]
  let rest = text.slice(root[0].length)
  while (rest !== '') {
    const segment = SEGMENT.exec(rest)
    if (segment === null)
      throw new ReactionError(
        file,
        `{{ ${text.slice(0, 80)} }} is not a reference: cannot read ${JSON.stringify(rest.slice(0, 40))} (use .key, ['key'] or [0])`,
      )
    path.push(segment[1] ?? segment[2] ?? segment[3] ?? segment[4]!)
    rest = rest.slice(segment[0].length)
  }
  return path
}

/** The value a path names in the event; ReactionError when it names nothing (own keys only, never a prototype's). */
function resolve(file: string, path: readonly string[], event: ReactionEvent): unknown {
  let value: unknown = path[0] === 'tag' ? event.tag : event.data
  for (const key of path.slice(1)) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, key)) {
      throw new ReactionError(file, `{{ ${path.join('.')} }} names nothing in the event ${JSON.stringify(event.tag.slice(0, 120))}`)
    }
    value = (value as Record<string, unknown>)[key]
  }
  return value
}

const asText = (value: unknown): string => (typeof value === 'string' ? value : (JSON.stringify(value) ?? 'null'))

/** Puts the references' values in: a string that is exactly one reference becomes its value (a list stays a list). */
function substitute(value: unknown, values: readonly unknown[]): unknown {
  if (typeof value === 'string') {
    const whole = /^__brine_ref_(\d+)__$/.exec(value)
    if (whole !== null) return structuredClone(values[Number(whole[1])])
    return value.replace(PLACEHOLDER, (_match, index: string) => asText(values[Number(index)]))
  }
  if (Array.isArray(value)) return value.map((item) => substitute(item, values))
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [String(substitute(key, values)), substitute(item, values)]))
  }
  return value
}

/**
 * Renders a reaction file for `event`: its `{{ … }}` references are taken out, the YAML parsed (as Salt
 * loads YAML), then each reference's value put back in the parsed tree — never into the text, so a value
 * from the event (a webhook's body) cannot add YAML keys or calls, and nothing is ever evaluated. No Jinja:
 * a reference is `tag`, `data` or a path under `data`; anything else is a ReactionError.
 */
export function renderReaction(file: string, text: string, event: ReactionEvent): unknown {
  const values: unknown[] = []
  const stripped = text.replace(REFERENCE, (_match, reference: string) => {
    if (values.length >= MAX_REFERENCES) throw new ReactionError(file, `more than ${MAX_REFERENCES} {{ }} references`)
    values.push(resolve(file, parseReference(file, reference), event))
    return placeholder(values.length - 1)
  })
  if (stripped.includes('{{') || stripped.includes('{%'))
    throw new ReactionError(file, 'has {{ or {% that is not a reference; Brine substitutes references only (no Jinja)')
  let parsed: unknown
  try {
    parsed = loadSaltYaml(stripped)
  } catch (error) {
    throw new ReactionError(file, `is not YAML: ${(error as Error).message}`, { cause: error })
  }
  return substitute(parsed, values)
}
