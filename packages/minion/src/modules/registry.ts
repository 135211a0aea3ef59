import { InvalidModuleNameError } from '../errors.js'
import type { ModuleContext, ModuleDefinition, ModuleFunction, ModuleRegistry } from './types.js'
import { cmdModule } from './cmd.js'
import { scriptFunctions } from './cmd-script.js'
import { cpModule } from './cp.js'
import { eventModule } from './event.js'
import { grainsModule } from './grains.js'
import { saltutilModule } from './saltutil.js'
import { scheduleModule } from './schedule.js'
import { sysModule } from './sys.js'
import { testModule } from './test.js'

/** The execution modules every minion has, by module name. */
export const BUILTIN_MODULES: Readonly<Record<string, ModuleDefinition>> = {
  cmd: { ...cmdModule, ...scriptFunctions({}) },
  cp: cpModule,
  event: eventModule,
  grains: grainsModule,
  saltutil: saltutilModule,
  schedule: scheduleModule,
  sys: sysModule,
  test: testModule,
}

/**
 * Builds Salt's `__salt__` for one minion: the built-in modules plus any `extra` ones (a custom
 * module replaces a built-in function of the same full name, as `_modules` do in Salt).
 */
export function createModuleRegistry(
  context: ModuleContext,
  extra: Readonly<Record<string, ModuleDefinition>> = {},
): ModuleRegistry {
  const functions = new Map<string, ModuleFunction>()
  const registry: ModuleRegistry = {
    context,
    get: (fun) => functions.get(fun),
    has: (fun) => functions.has(fun),
    names: () => [...functions.keys()].sort(),
    modules: () => [...new Set([...functions.keys()].map((name) => name.slice(0, name.indexOf('.'))))].sort(),
    register(module, definition) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(module)) throw new InvalidModuleNameError(module)
      for (const [short, spec] of Object.entries(definition)) {
        const name = `${module}.${short}`
        functions.set(name, { ...spec, name, args: spec.args ?? [] })
      }
    },
  }
  for (const [module, definition] of Object.entries(BUILTIN_MODULES)) registry.register(module, definition)
  for (const [module, definition] of Object.entries(extra)) registry.register(module, definition)
  // One listener for the minion's whole life, not one per job: stopping aborts whatever still runs.
  context.signal?.addEventListener('abort', () => context.jobs.abortAll(context.signal?.reason), { once: true })
  return registry
}
