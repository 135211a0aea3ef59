import { globToRegExp } from '@brine/targeting'
import type { AclEntry } from '../acl.js'

/**
 * Salt's `expr_match`: `pattern` equals `name`, or matches it as a glob, or as a regular expression
 * anchored at both ends. An invalid regex matches nothing.
 */
export function exprMatch(pattern: string, name: string): boolean {
  if (pattern === name) return true
  if (globToRegExp(pattern).test(name)) return true
  try {
    return new RegExp(`^(?:${pattern})$`).test(name)
  } catch {
    return false
  }
}

/**
 * Salt's `fill_auth_list`: the ACL entries of one backend's `external_auth` block that apply to user
 * `name` in `groups`. Entries of every user key that matches the name (`expr_match`: exact, glob or
 * regex) and of every `group%` key the user is in; `*`'s entries only when no user key matched, unless
 * `permissive` (Salt's `permissive_acl`), which adds them for everyone. Keys starting with `^` are the
 * backend's settings, not users.
 */
export function fillAuthList(block: Readonly<Record<string, unknown>>, name: string, groups: readonly string[], permissive: boolean): AclEntry[] {
  const out: AclEntry[] = []
  let nameMatched = false
  const add = (value: unknown): void => {
    if (Array.isArray(value)) out.push(...(value as AclEntry[]))
  }
  for (const [key, value] of Object.entries(block)) {
    if (key.startsWith('^')) continue
    if (key === '*' && !permissive) continue
    if (key.endsWith('%')) {
      if (groups.includes(key.slice(0, -1))) add(value)
    } else if (exprMatch(key, name)) {
      nameMatched = true
      add(value)
    }
  }
  if (!permissive && !nameMatched && Object.hasOwn(block, '*')) add(block['*'])
  return out
}
