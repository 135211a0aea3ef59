import { InvalidModuleNameError } from '../errors.js'
import type { ModuleContext, ModuleDefinition, ModuleFunction, ModuleRegistry } from './types.js'
import { cmdModule } from './cmd.js'
import { scriptFunctions } from './cmd-script.js'
import { cpModule } from './cp.js'
import { diskModule } from './disk.js'
import { environModule } from './environ.js'
import { eventModule } from './event.js'
import { fileModule } from './file.js'
import { grainsModule } from './grains.js'
import { networkModule } from './network.js'
import { pkgModule } from './pkg.js'
import { saltutilModule } from './saltutil.js'
import { scheduleModule } from './schedule.js'
import { serviceModule } from './service.js'
import { statusModule } from './status.js'
import { sysModule } from './sys.js'
import { testModule } from './test.js'
import { groupModule, userModule } from './user.js'

/** The execution modules every minion has, by module name. */
export const BUILTIN_MODULES: Readonly<Record<string, ModuleDefinition>> = {
  cmd: { ...cmdModule, ...scriptFunctions({}) },
  cp: cpModule,
  disk: diskModule,
  environ: environModule,
  event: eventModule,
  file: fileModule,
  grains: grainsModule,
  group: groupModule,
  network: networkModule,
  pkg: pkgModule,
  saltutil: saltutilModule,
  schedule: scheduleModule,
  service: serviceModule,
  status: statusModule,
  sys: sysModule,
  test: testModule,
  user: userModule,
}

/**
 * Builds Salt's `__salt__` for one minion: the built-in modules plus any `extra` ones (a custom
 * module replaces a built-in function of the same full name, as `_modules` do in Salt). Custom
 * modules loaded from disk form a layer of their own, replaced whole on each reload, so a function a
 * module no longer has goes away and the built-in it shadowed comes back.
 */
export function createModuleRegistry(context: ModuleContext, extra: Readonly<Record<string, ModuleDefinition>> = {}): ModuleRegistry {
  const functions = new Map<string, ModuleFunction>()
  let failures = new Map<string, string>()
  const register = (module: string, definition: ModuleDefinition): void => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(module)) throw new InvalidModuleNameError(module)
    for (const [short, spec] of Object.entries(definition)) {
      const name = `${module}.${short}`
      functions.set(name, { ...spec, name, args: spec.args ?? [] })
    }
  }
  /** True while the table holds the built-in and `extra` modules only: a reload that finds no custom module then has nothing to rebuild. */
  let baseOnly = false
  const registerBase = (): void => {
    for (const [module, definition] of Object.entries(BUILTIN_MODULES)) register(module, definition)
    for (const [module, definition] of Object.entries(extra)) register(module, definition)
    baseOnly = true
  }
  const registry: ModuleRegistry = {
    context,
    get: (fun) => functions.get(fun),
    has: (fun) => functions.has(fun),
    names: () => [...functions.keys()].sort(),
    modules: () => [...new Set([...functions.keys()].map((name) => name.slice(0, name.indexOf('.'))))].sort(),
    register: (module, definition) => {
      register(module, definition)
      baseOnly = false
    },
    setCustom(modules, failed = {}) {
      failures = new Map(Object.entries(failed))
      const custom = Object.entries(modules)
      // Every minion's start reloads its custom modules, and most have none: the table it built is already the answer.
      if (baseOnly && custom.length === 0) return
      functions.clear()
      registerBase()
      for (const [module, definition] of custom) register(module, definition)
      baseOnly = custom.length === 0
    },
    loadError: (module) => failures.get(module),
  }
  registerBase()
  // One listener for the minion's whole life, not one per job: stopping aborts whatever still runs.
  context.signal?.addEventListener('abort', () => context.jobs.abortAll(context.signal?.reason), { once: true })
  return registry
}
