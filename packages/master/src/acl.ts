/**
 * One entry of Salt's `external_auth` ACL: a function regex for every minion (`'test.*'`), a target
 * with its function regexes (`{'web*': ['test.*', 'cmd.run']}`, the target a compound expression),
 * `'@runner'` / `'@wheel'` / `'@jobs'` (a form or a module of runner and wheel functions), or
 * `{'@runner': ['jobs.*']}`.
 */
export type AclEntry = string | Readonly<Record<string, readonly string[]>>

/**
 * What a caller may do: `all` (root key, the master), or Salt's ACL entries — the sum of the
 * user's, `*`'s and their groups' entries under `external_auth`.
 */
export type Permissions = 'all' | readonly AclEntry[]

/** Whom the check is about: a user and their permissions (authorize.ts's Caller is one). */
export interface Grantee {
  readonly user: string
  readonly permissions: Permissions
}

/** What a caller asks to do, as the permission check sees it. */
export type Action = { kind: 'publish'; fun: string; minions: readonly string[] } | { kind: 'runner'; fun: string } | { kind: 'wheel'; fun: string }

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

const anyMatches = (regexes: readonly string[], fun: string): boolean =>
  Array.isArray(regexes) && regexes.some((regex) => typeof regex === 'string' && matches(regex, fun))

/**
 * Whether `caller` may do `action`, with Salt's rules (`auth_check`, `spec_check`): for a publish, an
 * entry's function regex must match the function and, for a target entry, the minions its target
 * selects (`minionsOf`, a compound expression) must include every minion the job would reach; runner
 * and wheel functions are reached only through `@` entries, never by a plain function glob.
 * Argument matching (Salt's `{fun: {args, kwargs}}` entries) is not supported: such an entry permits nothing.
 */
export function permits(caller: Grantee, action: Action, minionsOf: (target: string) => readonly string[]): boolean {
  if (caller.permissions === 'all') return true
  if (action.kind === 'publish') return PUBLISH_WHITELIST.has(action.fun) || caller.permissions.some((entry) => permitsPublish(entry, action, minionsOf))
  const [module, name] = action.fun.split('.', 2)
  if (module === undefined || name === undefined || module === '' || name === '') return false
  const call = { form: action.kind, fun: action.fun, module, name }
  return caller.permissions.some((entry) => permitsCall(entry, call))
}

/** One entry against a publish: a plain function regex (every minion), or `{target: [regexes]}` covering every minion reached. */
function permitsPublish(entry: AclEntry, action: Extract<Action, { kind: 'publish' }>, minionsOf: (target: string) => readonly string[]): boolean {
  if (typeof entry === 'string') return !entry.startsWith('@') && matches(entry, action.fun)
  const target = soleKey(entry)
  if (target === undefined || target.startsWith('@')) return false
  const allowed = new Set(minionsOf(target))
  if (allowed.size === 0) return false
  return action.minions.every((id) => allowed.has(id)) && anyMatches(entry[target]!, action.fun)
}

/** One entry against a runner or wheel call: only `@` entries reach them, never a plain function glob. */
function permitsCall(entry: AclEntry, call: { form: 'runner' | 'wheel'; fun: string; module: string; name: string }): boolean {
  const forms = [`@${call.form}`, `@${call.form}s`]
  if (typeof entry === 'string') return forms.includes(entry) || entry === `@${call.module}`
  const key = soleKey(entry)
  if (key === undefined || !key.startsWith('@')) return false
  // {'@jobs': ['list_.*']} matches the function name within the module; {'@runner': ['jobs.*']} the whole name.
  if (key === `@${call.module}` && anyMatches(entry[key]!, call.name)) return true
  return forms.includes(key) && anyMatches(entry[key]!, call.fun)
}

/** The key of a one-key entry (`{target: [...]}`); an entry with several keys permits nothing. */
function soleKey(entry: Readonly<Record<string, readonly string[]>>): string | undefined {
  const keys = Object.keys(entry)
  return keys.length === 1 ? keys[0] : undefined
}

/** The targets of `caller`'s publish entries (`{target: [functions]}`), whose minions {@link permits} needs resolved. */
export function aclTargets(caller: Grantee): string[] {
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
export function refusal(caller: Grantee, action: Action): string {
  if (action.kind === 'publish')
    return `user ${JSON.stringify(caller.user)} may not run ${JSON.stringify(action.fun)} on ${action.minions.length === 0 ? 'this target' : action.minions.slice(0, 10).join(', ')}${action.minions.length > 10 ? ', …' : ''}`
  return `user ${JSON.stringify(caller.user)} may not run ${action.kind} ${JSON.stringify(action.fun)}`
}
