/**
 * Argument checks shared by the daily modules: each refuses a bad value with an {@link InvocationError}
 * naming the argument and what it expected, before anything on the host is touched.
 */
import { isAbsolute } from 'node:path'
import { InvocationError } from '../errors.js'
import { runCommand, type CommandResult } from './cmd.js'
import type { JobContext } from './types.js'

export const isSet = (value: unknown): boolean => value !== null && value !== undefined

/** Refusal of argument `name`: "<name> must be <expected>, got <value>". */
export function badArgument(name: string, expected: string, value: unknown): InvocationError {
  let shown: string
  try {
    shown = JSON.stringify(value) ?? String(value)
  } catch {
    shown = String(value)
  }
  return new InvocationError(`${name} must be ${expected}, got ${shown.slice(0, 120)}`, { argument: name })
}

/** A non-empty string without NUL (numbers are taken as the CLI typed them). */
export function requireString(value: unknown, name: string): string {
  if (typeof value === 'number' && Number.isFinite(value)) return String(value)
  if (typeof value !== 'string' || value === '' || value.includes('\0')) throw badArgument(name, 'a non-empty string', value)
  return value
}

export function optionalString(value: unknown, name: string): string | undefined {
  return isSet(value) ? requireString(value, name) : undefined
}

/** An absolute path, as Salt's file functions require (`~` expanded by the caller is not done here). */
export function requirePath(value: unknown, name: string): string {
  const path = requireString(value, name)
  if (!isAbsolute(path)) throw new InvocationError(`${name} must be an absolute path, got ${JSON.stringify(path).slice(0, 120)}`, { argument: name })
  return path
}

/** Salt's truthiness of a CLI boolean: true/false, yes/no, 1/0 and their strings. */
export function toBool(value: unknown, name: string): boolean {
  if (value === true || value === false) return value
  if (value === 1 || value === 0) return value === 1
  if (typeof value === 'string') {
    const lower = value.toLowerCase()
    if (['true', 'yes', 'on', '1'].includes(lower)) return true
    if (['false', 'no', 'off', '0', ''].includes(lower)) return false
  }
  throw badArgument(name, 'true or false', value)
}

/** An integer in [min, max] (integer strings accepted). */
export function toInteger(value: unknown, name: string, min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): number {
  const number = typeof value === 'string' && /^\s*[-+]?\d+\s*$/.test(value) ? Number(value) : value
  if (typeof number !== 'number' || !Number.isInteger(number) || number < min || number > max) {
    throw badArgument(name, `an integer from ${min} to ${max}`, value)
  }
  return number
}

export function optionalInteger(value: unknown, name: string, min?: number, max?: number): number | undefined {
  return isSet(value) ? toInteger(value, name, min, max) : undefined
}

/** A positive number of seconds (float strings accepted). */
export function toSeconds(value: unknown, name: string, max = 86_400): number {
  const number = typeof value === 'string' && value.trim() !== '' ? Number(value) : value
  if (typeof number !== 'number' || !Number.isFinite(number) || number <= 0 || number > max)
    throw badArgument(name, `a number of seconds above 0, at most ${max}`, value)
  return number
}

/** A list of non-empty strings: a list, or one comma-separated string as Salt's CLI allows. */
export function toStringList(value: unknown, name: string): string[] {
  const list =
    typeof value === 'string'
      ? value
          .split(',')
          .map((item) => item.trim())
          .filter(Boolean)
      : value
  if (!Array.isArray(list)) throw badArgument(name, 'a list of strings (or one comma-separated string)', value)
  return list.map((item, index) => requireString(item, `${name}[${index}]`))
}

/** An octal file mode ('644', '0644', 0o644 given as 420, or 644 typed as a number) → its bits. */
export function toMode(value: unknown, name: string): number {
  const text = typeof value === 'number' ? String(value) : value
  if (typeof text !== 'string' || !/^0?[0-7]{1,4}$/.test(text.trim())) throw badArgument(name, "an octal mode such as '0644'", value)
  return Number.parseInt(text.trim(), 8)
}

/** A user or group name as useradd/groupadd accept it (no options, separators or control characters). */
export function requireAccountName(value: unknown, name: string): string {
  const text = requireString(value, name)
  if (!/^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,31}\$?$/.test(text)) throw badArgument(name, 'a user or group name (letters, digits, _ . -, not starting with -)', value)
  return text
}

/** A package or service name: never an option to the tool it is passed to. */
export function requireUnitName(value: unknown, name: string): string {
  const text = requireString(value, name)
  if (text.startsWith('-') || !/^[A-Za-z0-9@_.:+~=*-][A-Za-z0-9@_.:+~=*/\\-]*$/.test(text) || text.length > 256) {
    throw badArgument(name, 'a name of letters, digits and @ _ . : + ~ = - (not starting with -)', value)
  }
  return text
}

/** Runs a program with an argument array (never a shell), in the C locale, under the job's signal. */
export async function execArgv(
  ctx: JobContext,
  argv: readonly string[],
  options: { timeout?: number; stdin?: string; env?: Record<string, string> } = {},
): Promise<CommandResult> {
  return await runCommand(ctx, {
    cmd: argv,
    pythonShell: false,
    cwd: '/',
    env: { LC_ALL: 'C', LANG: 'C', ...options.env },
    timeout: options.timeout ?? 300,
    ...(options.stdin === undefined ? {} : { stdin: options.stdin }),
  })
}
