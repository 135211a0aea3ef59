import { TARGET_TYPES, type TargetType, type Tgt } from '@brine/protocol'
import { ReactionError } from '../errors.js'

/** One call a reaction file declares, as Salt's reactor SLS does (`local.<fun>`, `runner.<fun>`, `wheel.<fun>`). */
export type ReactionCall =
  | { id: string; form: 'local'; fun: string; tgt: Tgt; tgtType: TargetType; arg: unknown[]; kwarg: Record<string, unknown> }
  | { id: string; form: 'runner'; fun: string; arg: unknown[]; kwarg: Record<string, unknown> }
  | { id: string; form: 'wheel'; fun: string; kwarg: Record<string, unknown> }

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
const FORMS = new Set(['local', 'runner', 'wheel'])
const FUNCTION_NAME = /^[A-Za-z_]\w*(?:\.\w+)+$/
/** Most calls one reaction file may make. */
const MAX_CALLS = 100

/** A call's settings: Salt writes them as a list of one-key mappings (`- tgt: web1`), or as one mapping. */
function settingsOf(file: string, id: string, value: unknown): Record<string, unknown> {
  if (isMap(value)) return value
  if (value === null || value === undefined) return {}
  if (!Array.isArray(value)) throw new ReactionError(file, `${id}: the settings must be a list of key: value items`)
  const settings: Record<string, unknown> = {}
  for (const item of value) {
    if (!isMap(item) || Object.keys(item).length !== 1) throw new ReactionError(file, `${id}: each setting must be one key: value item`)
    Object.assign(settings, item)
  }
  return settings
}

/**
 * Salt's argument forms: `arg` (positional list) and `kwarg` (mapping), and the newer `args`, a list whose
 * mappings are keyword arguments (`- args: [{cmd: 'echo hi'}]`) and whose other items are positional.
 */
function argumentsOf(
  file: string,
  id: string,
  settings: Record<string, unknown>,
  rest: Record<string, unknown>,
): { arg: unknown[]; kwarg: Record<string, unknown> } {
  const arg = settings['arg'] ?? []
  const kwarg = settings['kwarg'] ?? {}
  if (!Array.isArray(arg)) throw new ReactionError(file, `${id}: arg must be a list`)
  if (!isMap(kwarg)) throw new ReactionError(file, `${id}: kwarg must be a mapping`)
  const out = { arg: [...arg], kwarg: { ...rest, ...kwarg } }
  const args = settings['args']
  if (args === undefined || args === null) return out
  for (const item of Array.isArray(args) ? args : [args]) {
    if (isMap(item)) Object.assign(out.kwarg, item)
    else out.arg.push(item)
  }
  return out
}

function without(settings: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(settings).filter(([key]) => !keys.includes(key)))
}

function localCall(file: string, id: string, fun: string, settings: Record<string, unknown>): ReactionCall {
  const tgt = settings['tgt']
  const tgtType = settings['tgt_type'] ?? settings['expr_form'] ?? 'glob'
  const validTgt = typeof tgt === 'string' ? tgt !== '' : Array.isArray(tgt) && tgt.length > 0 && tgt.every((item) => typeof item === 'string')
  if (!validTgt)
    throw new ReactionError(file, `${id}: local.${fun} needs tgt (a target string or a list of minion ids), got ${JSON.stringify(tgt)?.slice(0, 80)}`)
  if (typeof tgtType !== 'string' || !(TARGET_TYPES as readonly string[]).includes(tgtType))
    throw new ReactionError(file, `${id}: tgt_type must be one of ${TARGET_TYPES.join(', ')}`)
  const { arg, kwarg } = argumentsOf(file, id, settings, {})
  return { id, form: 'local', fun, tgt: tgt as Tgt, tgtType: tgtType as TargetType, arg, kwarg }
}

/** The calls a rendered reaction file declares, in its order; ReactionError for anything else. */
export function reactionCalls(file: string, rendered: unknown): ReactionCall[] {
  if (rendered === null || rendered === undefined) return []
  if (!isMap(rendered)) throw new ReactionError(file, 'must be a mapping of ids to calls')
  const calls: ReactionCall[] = []
  for (const [id, body] of Object.entries(rendered)) {
    if (!isMap(body) || Object.keys(body).length !== 1)
      throw new ReactionError(file, `${id}: must hold exactly one call (local.<fun>, runner.<fun> or wheel.<fun>)`)
    const [name, value] = Object.entries(body)[0]!
    const dot = name.indexOf('.')
    const form = name.slice(0, dot)
    const fun = name.slice(dot + 1)
    if (dot < 0 || !FORMS.has(form) || !FUNCTION_NAME.test(fun))
      throw new ReactionError(
        file,
        `${id}: ${JSON.stringify(name.slice(0, 80))} is not local.<fun>, runner.<fun> or wheel.<fun> (caller and state forms are not supported)`,
      )
    const settings = settingsOf(file, id, value)
    if (form === 'local') calls.push(localCall(file, id, fun, settings))
    else if (form === 'runner') calls.push({ id, form: 'runner', fun, ...argumentsOf(file, id, settings, without(settings, ['arg', 'kwarg', 'args'])) })
    else calls.push({ id, form: 'wheel', fun, kwarg: argumentsOf(file, id, settings, without(settings, ['arg', 'kwarg', 'args'])).kwarg })
    if (calls.length > MAX_CALLS) throw new ReactionError(file, `declares more than ${MAX_CALLS} calls`)
  }
  return calls
}
