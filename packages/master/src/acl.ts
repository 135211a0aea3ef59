import type { Caller } from './authorize.js'

/**
 * One entry of Salt's `external_auth` ACL: a function regex for every minion (`'test.*'`), a target
 * with its function regexes (`{'web*': ['test.*', 'cmd.run']}`, the target a compound expression),
 * `'@runner'` / `'@wheel'` / `'@jobs'` (a form or a module of runner and wheel functions), or
 * `{'@runner': ['jobs.*']}`.
 */
export type AclEntry = string | Readonly<Record<string, readonly string[]>>

/** What a caller asks to do, as the permission check sees it. */
export type Action =
  | { kind: 'publish'; fun: string; minions: readonly string[] }
  | { kind: 'runner'; fun: string }
  | { kind: 'wheel'; fun: string }

/** Functions every caller may publish whatever its ACL (Salt: the client's find_job follow-up). */
const PUBLISH_WHITELIST = new Set(['saltutil.find_job'])

/** Salt's `match_check`: `re.match` (anchored at the start only); an invalid regex matches nothing. */
function matches(regex: string, fun: string): boolean {
  try {
    return new RegExp(`^(?:${regex})`).test(fun)
  } catch {
    return false
  }
}

const anyMatches = (regexes: readonly string[], fun: string): boolean => Array.isArray(regexes) && regexes.some((regex) => typeof regex === 'string' && matches(regex, fun))

/**
 * Whether `caller` may do `action`, with Salt's rules (`auth_check`, `spec_check`): for a publish, an
 * entry's function regex must match the function and, for a target entry, the minions its target
 * selects (`minionsOf`, a compound expression) must include every minion the job would reach; runner
 * and wheel functions are reached only through `@` entries, never by a plain function glob.
 * Argument matching (Salt's `{fun: {args, kwargs}}` entries) is not supported: such an entry permits nothing.
 */
export function permits(caller: Caller, action: Action, minionsOf: (target: string) => readonly string[]): boolean {
  if (caller.permissions === 'all') return true
  const entries = caller.permissions
  if (action.kind === 'publish') {
    if (PUBLISH_WHITELIST.has(action.fun)) return true
    for (const entry of entries) {
      if (typeof entry === 'string') {
        if (!entry.startsWith('@') && matches(entry, action.fun)) return true
        continue
      }
      const keys = Object.keys(entry)
      if (keys.length !== 1 || keys[0]!.startsWith('@')) continue
      const target = keys[0]!
      const allowed = new Set(minionsOf(target))
      if (allowed.size === 0) continue
      if (action.minions.every((id) => allowed.has(id)) && anyMatches(entry[target]!, action.fun)) return true
    }
    return false
  }
  const form = action.kind
  const [module, name] = action.fun.split('.', 2)
  if (module === undefined || name === undefined || module === '' || name === '') return false
  for (const entry of entries) {
    if (typeof entry === 'string') {
      if (entry === `@${form}` || entry === `@${form}s` || entry === `@${module}`) return true
      continue
    }
    const keys = Object.keys(entry)
    if (keys.length !== 1 || !keys[0]!.startsWith('@')) continue
    const key = keys[0]!
    // {'@jobs': ['list_.*']} matches the function name within the module; {'@runner': ['jobs.*']} the whole name.
    if (key === `@${module}` && anyMatches(entry[key]!, name)) return true
    if ((key === `@${form}` || key === `@${form}s`) && anyMatches(entry[key]!, action.fun)) return true
  }
  return false
}

/** The targets of `caller`'s publish entries (`{target: [functions]}`), whose minions {@link permits} needs resolved. */
export function aclTargets(caller: Caller): string[] {
  if (caller.permissions === 'all') return []
  const targets = new Set<string>()
  for (const entry of caller.permissions) {
    if (typeof entry === 'string') continue
    const keys = Object.keys(entry)
    if (keys.length === 1 && !keys[0]!.startsWith('@')) targets.add(keys[0]!)
  }
  return [...targets]
}

/** The refusal text for `action`: who may not do what (a PermissionDeniedError's reason). */
export function refusal(caller: Caller, action: Action): string {
  if (action.kind === 'publish') return `user ${JSON.stringify(caller.user)} may not run ${JSON.stringify(action.fun)} on ${action.minions.length === 0 ? 'this target' : action.minions.slice(0, 10).join(', ')}${action.minions.length > 10 ? ', …' : ''}`
  return `user ${JSON.stringify(caller.user)} may not run ${action.kind} ${JSON.stringify(action.fun)}`
}
