/** Salt's `environ` module (salt/modules/environ.py): the minion process's own environment. */
import type { ModuleDefinition } from './types.js'
import { badArgument, requireString, toBool } from './validate.js'

/** An environment variable name: no `=` and no NUL, as setenv(3) requires. */
function keyOf(value: unknown, name: string): string {
  const key = requireString(value, name)
  if (key.includes('=')) throw badArgument(name, "an environment variable name (no '=')", value)
  return key
}

export const environModule: ModuleDefinition = {
  get: {
    doc: "Get a single environment variable of the minion process, or ``default`` ('' unless given) when it is not set.\n\nCLI Example:\n\n    brine '*' environ.get foo\n    brine '*' environ.get baz default=False",
    args: ['key', 'default'],
    defaults: { default: '' },
    run: async ([key, fallback]) => process.env[keyOf(key, 'key')] ?? fallback,
  },
  setval: {
    doc: "Set a single environment variable of the minion process; returns the value set. ``val=False`` with ``false_unsets=True`` unsets it instead (returns None); without, it sets ''.\n\nCLI Example:\n\n    brine '*' environ.setval foo bar\n    brine '*' environ.setval baz val=False false_unsets=True",
    args: ['key', 'val', 'false_unsets'],
    defaults: { false_unsets: false },
    run: async ([keyArg, val, falseUnsets]) => {
      const key = keyOf(keyArg, 'key')
      if (val === false) {
        if (toBool(falseUnsets, 'false_unsets')) {
          delete process.env[key]
          return null
        }
        process.env[key] = ''
        return ''
      }
      if (typeof val !== 'string') throw badArgument('val', 'a string (quote numbers: val="\'1\'")', val)
      if (val.includes('\0')) throw badArgument('val', 'a string without NUL', val)
      process.env[key] = val
      return val
    },
  },
  has_value: {
    doc: "Return True if the variable is set (and, with ``value``, equal to it).\n\nCLI Example:\n\n    brine '*' environ.has_value foo",
    args: ['key', 'value'],
    defaults: { value: null },
    run: async ([key, value]) => {
      const current = process.env[keyOf(key, 'key')]
      return value === null || value === undefined ? current !== undefined : current === String(value)
    },
  },
  items: {
    doc: "Return all of the minion process's environment variables.\n\nCLI Example:\n\n    brine '*' environ.items",
    run: async () => ({ ...process.env }),
  },
}
