/**
 * Salt's `cmd.script` and `cmd.script_retcode`: fetch a script (salt://, http(s)://, or a local path),
 * copy it into a private temporary directory, run it with its arguments through the cmd.run machinery
 * (cwd, env, runas, shell, stdin, timeout, output_loglevel) and remove it afterwards.
 */
import { chmod, chown, copyFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, extname, join } from 'node:path'
import { CommandExecutionError, InvocationError } from '../errors.js'
import { asCommandError } from '../file-client.js'
import { lookupUser, pythonShellDefault, runFor, type CmdModuleOptions, type CommandResult } from './cmd.js'
import { cacheFileFor } from './cp.js'
import type { JobContext, ModuleDefinition, ModuleFunctionSpec } from './types.js'

/** Salt 3006's cmd.script parameters, in its positional order. */
const SCRIPT_ARGS = [
  'source',
  'args',
  'cwd',
  'stdin',
  'runas',
  'group',
  'shell',
  'python_shell',
  'env',
  'template',
  'umask',
  'output_encoding',
  'output_loglevel',
  'log_callback',
  'hide_output',
  'timeout',
  'reset_system_locale',
  'saltenv',
  'use_vt',
  'bg',
  'password',
  'success_retcodes',
] as const

const SCRIPT_DEFAULTS: Record<string, unknown> = {
  args: null,
  cwd: null,
  stdin: null,
  runas: null,
  group: null,
  shell: null,
  python_shell: null,
  env: null,
  template: null,
  umask: null,
  output_encoding: null,
  output_loglevel: 'debug',
  log_callback: null,
  hide_output: false,
  timeout: null,
  reset_system_locale: true,
  saltenv: null,
  use_vt: false,
  bg: false,
  password: null,
  success_retcodes: null,
}

/** POSIX single quoting: the word reaches the program exactly as given. */
const quote = (word: string): string => `'${word.replaceAll("'", `'\\''`)}'`

/** `args` as Salt takes it: a string passed to the shell as written, or a list of words, each quoted. */
function argumentText(args: unknown): string {
  if (args === null || args === undefined || args === '') return ''
  if (Array.isArray(args)) return args.map((word) => quote(String(word))).join(' ')
  if (typeof args === 'string' || typeof args === 'number') return String(args)
  throw new InvocationError('args must be a string or a list')
}

/** What cmd.script answers when the script could not be fetched (Salt's shape). */
const CACHE_ERROR = { pid: 0, retcode: 1, stdout: '', stderr: '', cache_error: true }

async function runScript(
  ctx: JobContext,
  values: readonly unknown[],
  kwargs: Readonly<Record<string, unknown>>,
  moduleOptions: CmdModuleOptions,
): Promise<CommandResult | typeof CACHE_ERROR> {
  const params = Object.fromEntries(SCRIPT_ARGS.map((name, index) => [name, values[index]])) as Record<(typeof SCRIPT_ARGS)[number], unknown>
  if (typeof params.source !== 'string' || params.source === '')
    throw new InvocationError('source must be a non-empty string (salt://path, http(s)://… or a local path)')
  if (params.template !== null && params.template !== undefined)
    throw new InvocationError(`template rendering (template=${String(params.template)}) is not supported by Brine's cmd.script`)
  const cached = await cacheFileFor(ctx, params.source, params.saltenv).catch((error: unknown) => {
    throw asCommandError(error)
  })
  if (cached === false) {
    ctx.logger.error(`cmd.script: unable to cache script ${params.source}`)
    ctx.retcode = 1
    return CACHE_ERROR
  }
  const runas = typeof params.runas === 'string' && params.runas !== '' ? params.runas : undefined
  // A directory only this job (and its runas user) can enter: the copy cannot be swapped before it runs.
  const dir = await mkdtemp(join(tmpdir(), 'brine-script-'))
  try {
    const script = join(dir, `script${extname(basename(cached))}`)
    await copyFile(cached, script)
    await chmod(script, 0o500)
    if (runas !== undefined && process.getuid?.() === 0) {
      const user = await lookupUser(runas)
      await chown(dir, user.uid, user.gid)
      await chown(script, user.uid, user.gid)
    }
    const args = argumentText(params.args)
    const { source: _source, args: _args, saltenv: _saltenv, ...rest } = params
    return await runFor(
      ctx,
      { ...rest, cmd: args === '' ? quote(script) : `${quote(script)} ${args}`, python_shell: pythonShellDefault(params.python_shell, kwargs) },
      {},
      moduleOptions,
    )
  } catch (error) {
    if (error instanceof CommandExecutionError || error instanceof InvocationError) throw error
    throw new CommandExecutionError(`cmd.script ${params.source}: ${(error as Error).message}`, { source: params.source }, { cause: error })
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

const SCRIPT_DOC = `

source
    The script: salt://path[?saltenv=env], http(s)://… or a local path.
args
    Its arguments: a string, given to the shell as written, or a list of words (each quoted).
cwd, stdin, runas, shell, python_shell, env, timeout, output_loglevel, hide_output, success_retcodes
    As for cmd.run. The script runs from a private temporary directory and is removed afterwards;
    without cwd it runs in the runas user's home (else '/'). template= is not supported.`

function scriptSpec(doc: string, moduleOptions: CmdModuleOptions, finish: (result: CommandResult | typeof CACHE_ERROR) => unknown): ModuleFunctionSpec {
  return {
    doc: doc + SCRIPT_DOC,
    args: SCRIPT_ARGS,
    defaults: SCRIPT_DEFAULTS,
    kwargs: true,
    run: async (args, kwargs, ctx) => {
      const result = await runScript(ctx, args, kwargs, moduleOptions)
      return finish(args[SCRIPT_ARGS.indexOf('hide_output')] === true && !('cache_error' in result) ? { ...result, stdout: '', stderr: '' } : result)
    },
  }
}

/** cmd.script and cmd.script_retcode, added to the cmd module. */
export function scriptFunctions(moduleOptions: CmdModuleOptions): ModuleDefinition {
  return {
    script: scriptSpec(
      "Download a script from a remote location and execute it locally with its arguments. Returns a dict: pid, retcode, stdout, stderr.\n\nCLI Example:\n\n    brine '*' cmd.script salt://scripts/runme.sh 'arg1 arg2 \"arg 3\"'",
      moduleOptions,
      (result) => result,
    ),
    script_retcode: scriptSpec(
      "Download a script from a remote location and execute it locally; return only its exit status.\n\nCLI Example:\n\n    brine '*' cmd.script_retcode salt://scripts/runme.sh",
      moduleOptions,
      (result) => result.retcode,
    ),
  }
}
