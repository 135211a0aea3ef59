/** Salt's `sys` module: what the minion can do, and the docs for it. */
import { fnmatch } from './args.js'
import type { JobContext, ModuleDefinition } from './types.js'

/**
 * Salt's selection rule for sys.* arguments: a pattern with `*` or `.` is a glob over full names;
 * a bare module name matches `module.` exactly (so `sys` does not match `sysctl`).
 */
function select(names: readonly string[], patterns: readonly unknown[]): string[] {
  if (patterns.length === 0) return [...names]
  const chosen = new Set<string>()
  for (const raw of patterns) {
    const pattern = String(raw)
    for (const name of names) {
      if (pattern.includes('*') || pattern.includes('.') ? fnmatch(name, pattern) : name.startsWith(`${pattern}.`)) chosen.add(name)
    }
  }
  return [...chosen].sort()
}

function docs(ctx: JobContext, patterns: readonly unknown[]): Record<string, string> {
  return Object.fromEntries(select(ctx.registry.names(), patterns).map((name) => [name, ctx.registry.get(name)?.doc ?? '']))
}

export const sysModule: ModuleDefinition = {
  doc: {
    doc: "Return the docstrings for all modules. Optionally, specify a module or a number of modules, or a function.\n\nCLI Example:\n\n    brine '*' sys.doc\n    brine '*' sys.doc sys\n    brine '*' sys.doc sys.doc\n    brine '*' sys.doc network.traceroute user.info",
    varargs: true,
    run: async (args, _kwargs, ctx) => docs(ctx, args),
  },
  list_functions: {
    doc: "List the functions for all modules. Optionally, specify a module or modules from which to list.\n\nCLI Example:\n\n    brine '*' sys.list_functions\n    brine '*' sys.list_functions sys\n    brine '*' sys.list_functions 'sys.list_*'",
    varargs: true,
    kwargs: true,
    run: async (args, _kwargs, ctx) => select(ctx.registry.names(), args),
  },
  list_modules: {
    doc: "List the modules loaded on the minion. Globs are accepted.\n\nCLI Example:\n\n    brine '*' sys.list_modules\n    brine '*' sys.list_modules 's*'",
    varargs: true,
    run: async (args, _kwargs, ctx) => {
      const modules = ctx.registry.modules()
      if (args.length === 0) return modules
      return modules.filter((module) => args.some((pattern) => fnmatch(module, String(pattern))))
    },
  },
  argspec: {
    doc: "Return the argument specification of functions in Salt execution modules.\n\nCLI Example:\n\n    brine '*' sys.argspec test.echo\n    brine '*' sys.argspec 'test.*'",
    varargs: true,
    run: async (args, _kwargs, ctx) =>
      Object.fromEntries(
        select(ctx.registry.names(), args).map((name) => {
          const fn = ctx.registry.get(name)
          const defaults = fn?.args.filter((arg) => fn.defaults !== undefined && Object.hasOwn(fn.defaults, arg)).map((arg) => fn.defaults?.[arg])
          return [
            name,
            {
              args: [...(fn?.args ?? [])],
              defaults: defaults === undefined || defaults.length === 0 ? null : defaults,
              kwargs: fn?.kwargs === true ? true : null,
              varargs: fn?.varargs === true ? true : null,
            },
          ]
        }),
      ),
  },
}
