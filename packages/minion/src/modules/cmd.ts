/**
 * Salt's `cmd` module (salt/modules/cmdmod.py): run shell commands as real child processes.
 * Each command is its own process group, so a timeout, saltutil.kill_job or a minion shutdown
 * kills the whole tree it started, not just the shell.
 */
import type { ChildProcess } from 'node:child_process'
import { accessSync, constants as fsConstants, statSync } from 'node:fs'
import { homedir, constants as osConstants } from 'node:os'
import { delimiter, isAbsolute, join } from 'node:path'
import { promisify } from 'node:util'
import { isPlainObject } from './args.js'
import { abortReason, CommandExecutionError, InvocationError } from '../errors.js'
import { toInt } from './test.js'
import { parseLogLevel, type LogLevel } from '@brine/core'
import type { JobContext, ModuleDefinition, ModuleFunctionSpec } from './types.js'
import { msFromSeconds } from '@brine/config'

/**
 * node:child_process, loaded at the first command rather than with this module: every minion loads the execution
 * modules at start, and one that runs no command would hold its code (and node:dgram's, which it loads) for nothing.
 */
const childProcess = (): typeof import('node:child_process') => process.getBuiltinModule('node:child_process')

function execFileAsync(file: string, args: readonly string[], options: { timeout: number }): Promise<{ stdout: string; stderr: string }> {
  return promisify(childProcess().execFile)(file, args, options)
}

/** Default cap on what one stream of one command may return (matches `max_frame_bytes`). */
export const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024 * 1024

export interface CmdModuleOptions {
  /** Seam for the runas check; defaults to `process.getuid`. */
  getuid?: () => number
  /** Bytes kept per stream before output is cut with a marker (default 64 MiB). */
  maxOutputBytes?: number
  /** Shell used with `python_shell` when the caller names none (default `/bin/sh`). */
  defaultShell?: string
}

/** What a command run produced; Salt's `cmd.run_all` shape. */
export interface CommandResult {
  pid: number
  retcode: number
  stdout: string
  stderr: string
}

export interface RunCommandOptions {
  cmd: string | readonly string[]
  cwd?: string
  stdin?: string
  runas?: string
  shell?: string
  /** Run through `shell -c` (true) or split into argv and exec directly (false). */
  pythonShell?: boolean
  env?: Readonly<Record<string, unknown>>
  cleanEnv?: boolean
  prependPath?: string
  /** Seconds. */
  timeout?: number
  rstrip?: boolean
  /** Fold stderr into stdout in arrival order, as Salt's cmd.run does (stderr=subprocess.STDOUT). */
  redirectStderr?: boolean
}

/** The parameters of Salt's cmd.run family, in Salt's positional order. */
const RUN_ARGS = [
  'cmd',
  'cwd',
  'stdin',
  'runas',
  'group',
  'shell',
  'python_shell',
  'env',
  'clean_env',
  'template',
  'rstrip',
  'umask',
  'output_encoding',
  'output_loglevel',
  'log_callback',
  'hide_output',
  'timeout',
  'reset_system_locale',
  'ignore_retcode',
  'saltenv',
  'use_vt',
  'bg',
  'password',
  'encoded_cmd',
  'raise_err',
  'prepend_path',
  'success_retcodes',
] as const

const RUN_DEFAULTS: Record<string, unknown> = {
  cwd: null,
  stdin: null,
  runas: null,
  group: null,
  shell: null,
  python_shell: null,
  env: null,
  clean_env: false,
  template: null,
  rstrip: true,
  umask: null,
  output_encoding: null,
  output_loglevel: 'debug',
  log_callback: null,
  hide_output: false,
  timeout: null,
  reset_system_locale: true,
  ignore_retcode: false,
  saltenv: 'base',
  use_vt: false,
  bg: false,
  password: null,
  encoded_cmd: false,
  raise_err: false,
  prepend_path: null,
  success_retcodes: null,
}

/** Salt options we accept by name but cannot honour; a non-default value is refused, not ignored. */
const UNSUPPORTED = ['group', 'template', 'umask', 'use_vt', 'bg', 'password', 'encoded_cmd'] as const

type Params = Record<(typeof RUN_ARGS)[number], unknown>

function toParams(args: readonly unknown[]): Params {
  return Object.fromEntries(RUN_ARGS.map((name, index) => [name, args[index]])) as Params
}

const isSet = (value: unknown): boolean => value !== null && value !== undefined
const optionalString = (value: unknown, name: string): string | undefined => {
  if (!isSet(value)) return undefined
  if (typeof value === 'string') return value
  if (typeof value === 'number') return String(value)
  throw new InvocationError(`${name} must be a string`)
}

/** POSIX shlex.split (no comments): quotes and backslashes as /bin/sh reads them. */
export function shlexSplit(text: string): string[] {
  const words: string[] = []
  let word = ''
  let inWord = false
  for (let index = 0; index < text.length; index++) {
    const char = text[index] as string
    if (/\s/.test(char)) {
      if (inWord) words.push(word)
      word = ''
      inWord = false
    } else if (char === "'") {
      const end = text.indexOf("'", index + 1)
      if (end === -1) throw new InvocationError(`No closing quotation in command: ${text}`)
      word += text.slice(index + 1, end)
      index = end
      inWord = true
    } else if (char === '"') {
      inWord = true
      for (index++; ; index++) {
        if (index >= text.length) throw new InvocationError(`No closing quotation in command: ${text}`)
        const inner = text[index] as string
        if (inner === '"') break
        if (inner === '\\' && '\\"$`\n'.includes(text[index + 1] ?? '')) word += text[++index]
        else word += inner
      }
    } else if (char === '\\') {
      if (index + 1 >= text.length) throw new InvocationError(`No escaped character in command: ${text}`)
      word += text[++index]
      inWord = true
    } else {
      word += char
      inWord = true
    }
  }
  if (inWord) words.push(word)
  return words
}

export interface RunasIdentity {
  uid: number
  gid: number
  home: string
}

/** A user's uid, gid and home (`id`, `getent`); CommandExecutionError when there is no such user. */
export async function lookupUser(user: string): Promise<RunasIdentity> {
  try {
    const [uid, gid] = await Promise.all([execFileAsync('id', ['-u', user], { timeout: 10_000 }), execFileAsync('id', ['-g', user], { timeout: 10_000 })])
    let home = '/'
    try {
      const entry = await execFileAsync('getent', ['passwd', user], { timeout: 10_000 })
      home = entry.stdout.trim().split(':')[5] ?? '/'
    } catch {
      // No getent (or no entry from it): fall back to '/', as Salt does for an unreadable home.
    }
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()), home }
  } catch {
    throw new CommandExecutionError(`User '${user}' is not available`, { user })
  }
}

function readableDirectory(path: string): boolean {
  try {
    accessSync(path, fsConstants.R_OK)
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

/** Appends chunks up to a byte limit; past it, drops the rest and remembers it did. */
class CappedBuffer {
  readonly #chunks: Buffer[] = []
  #size = 0
  #truncated = false
  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    if (this.#truncated) return
    const room = this.limit - this.#size
    if (chunk.length > room) {
      this.#chunks.push(chunk.subarray(0, room))
      this.#size = this.limit
      this.#truncated = true
      return
    }
    this.#chunks.push(chunk)
    this.#size += chunk.length
  }

  text(rstrip: boolean): string {
    let text = Buffer.concat(this.#chunks).toString('utf8')
    if (rstrip) text = text.replace(/\s+$/u, '')
    if (this.#truncated) text += `\n[brine: output truncated at ${this.limit} bytes]`
    return text
  }
}

/**
 * Runs one command to completion. Rejects with {@link CommandExecutionError} when it cannot start
 * (bad cwd, unknown runas user, runas without root), and with the job's abort reason when the job
 * is killed; a timeout resolves like Salt's: stdout `<cmd> : Timed out after N seconds`, retcode 1.
 */
export async function runCommand(
  ctx: Pick<JobContext, 'signal' | 'jid' | 'trackChild' | 'untrackChild'>,
  options: RunCommandOptions,
  moduleOptions: CmdModuleOptions = {},
): Promise<CommandResult> {
  const { cmd } = options
  if (typeof cmd === 'string' ? cmd.trim() === '' : cmd.length === 0) throw new InvocationError('cmd must not be empty')
  // No await without runas: the child is then spawned and tracked in the job's first turn, so find_job sees it at once.
  const identity = options.runas === undefined ? undefined : await runasIdentity(options.runas, moduleOptions)
  const cwd = workingDirectory(options.cwd, identity)
  const env = commandEnv(options, identity)
  const invocation = { ...commandLine(options, moduleOptions, env), cwd, env, ...(identity === undefined ? {} : { identity }) }
  if (ctx.signal.aborted) throw abortReason(ctx.signal, ctx.jid)
  return await spawnToCompletion(ctx, invocation, options, moduleOptions.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES)
}

/** Salt's `runas`: only a root minion may switch users. */
async function runasIdentity(runas: string, moduleOptions: CmdModuleOptions): Promise<RunasIdentity> {
  const uid = (moduleOptions.getuid ?? (() => process.getuid?.() ?? -1))()
  if (uid !== 0) throw new CommandExecutionError(`runas requires root (minion runs as uid ${uid})`, { runas, uid })
  return lookupUser(runas)
}

function workingDirectory(cwd: string | undefined, identity: RunasIdentity | undefined): string {
  if (cwd === undefined) {
    // Salt's default: the (runas) user's home when readable, else '/'.
    const home = identity?.home ?? homedir()
    return readableDirectory(home) ? home : '/'
  }
  if (!isAbsolute(cwd) || !readableDirectory(cwd)) throw new CommandExecutionError(`Specified cwd '${cwd}' either not absolute or does not exist`, { cwd })
  return cwd
}

function commandEnv(options: RunCommandOptions, identity: RunasIdentity | undefined): Record<string, string> {
  const env: Record<string, string> = {}
  if (options.cleanEnv !== true) for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value
  if (identity !== undefined && options.runas !== undefined) {
    Object.assign(env, { USER: options.runas, LOGNAME: options.runas, HOME: identity.home })
  }
  for (const [key, value] of Object.entries(options.env ?? {})) env[key] = typeof value === 'string' ? value : JSON.stringify(value)
  if (options.prependPath !== undefined) env.PATH = env.PATH === undefined ? options.prependPath : `${options.prependPath}${delimiter}${env.PATH}`
  return env
}

/** The program and its argv, and how the command reads in messages. */
interface CommandLine {
  file: string
  argv: string[]
  display: string
  redirect: boolean
}

/** A command ready to spawn. */
interface Invocation extends CommandLine {
  cwd: string
  env: Record<string, string>
  identity?: RunasIdentity
}

function commandLine(options: RunCommandOptions, moduleOptions: CmdModuleOptions, env: Record<string, string>): CommandLine {
  const { cmd } = options
  const display = typeof cmd === 'string' ? cmd : cmd.join(' ')
  // Folding stderr into stdout is done by the kernel (one pipe behind fds 1 and 2, as Python's
  // stderr=STDOUT does), not by merging two pipes in arrival order, which reorders lines.
  const redirect = options.redirectStderr === true
  if (options.pythonShell !== false) {
    const file = options.shell ?? moduleOptions.defaultShell ?? '/bin/sh'
    return { file, argv: ['-c', redirect ? `exec 2>&1\n${display}` : display], display, redirect }
  }
  const words = typeof cmd === 'string' ? shlexSplit(cmd) : [...cmd]
  const program = words[0] as string
  if (!redirect) return { file: program, argv: words.slice(1), display, redirect }
  if (which(program, env.PATH) === null) {
    throw new CommandExecutionError(`Unable to run command '${display}', reason: ${program}: not found (ENOENT)`, { cmd: display })
  }
  return { file: '/bin/sh', argv: ['-c', 'exec "$@" 2>&1', 'brine-cmd', ...words], display, redirect }
}

/** Spawns `invocation` in its own process group and waits for it to close, killed on timeout or on the job's abort. */
function spawnToCompletion(
  ctx: Pick<JobContext, 'signal' | 'jid' | 'trackChild' | 'untrackChild'>,
  invocation: Invocation,
  options: RunCommandOptions,
  limit: number,
): Promise<CommandResult> {
  const { display, identity } = invocation
  return new Promise<CommandResult>((resolve, reject) => {
    let child: ChildProcess
    try {
      child = childProcess().spawn(invocation.file, invocation.argv, {
        cwd: invocation.cwd,
        env: invocation.env,
        detached: true, // its own process group, killed as a whole
        stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
        ...(identity === undefined ? {} : { uid: identity.uid, gid: identity.gid }),
      })
    } catch (error) {
      reject(new CommandExecutionError(`Unable to run command '${display}', reason: ${(error as Error).message}`, { cmd: display }, { cause: error }))
      return
    }
    const watch = new ChildWatch(ctx, child.pid, options.timeout)
    const output = collectOutput(child, limit, options.stdin)
    child.once('error', (error) => {
      watch.cleanup()
      reject(new CommandExecutionError(`Unable to run command '${display}', reason: ${error.message}`, { cmd: display }, { cause: error }))
    })
    child.once('close', (code, signal) => {
      watch.cleanup()
      if (watch.aborted) return reject(abortReason(ctx.signal, ctx.jid))
      const pid = child.pid ?? 0
      if (watch.timedOut) return resolve({ pid, retcode: 1, stdout: `${display} : Timed out after ${options.timeout} seconds`, stderr: '' })
      // Python's returncode for a signalled child is minus the signal number.
      const retcode = code ?? (signal === null ? 1 : -(osConstants.signals[signal] ?? 1))
      const rstrip = options.rstrip !== false
      resolve({ pid, retcode, stdout: output.stdout.text(rstrip), stderr: invocation.redirect ? '' : output.stderr.text(rstrip) })
    })
  })
}

/** Reads both output streams into capped buffers and feeds the command its stdin. */
function collectOutput(child: ChildProcess, limit: number, stdin: string | undefined): { stdout: CappedBuffer; stderr: CappedBuffer } {
  const stdout = new CappedBuffer(limit)
  const stderr = new CappedBuffer(limit)
  child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk))
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk))
  if (child.stdin !== null && stdin !== undefined) {
    child.stdin.on('error', () => {}) // the command may exit without reading its input
    // Salt turns a literal "\n" typed on the CLI into a newline.
    child.stdin.end(stdin.replaceAll('\\n', '\n'))
  }
  return { stdout, stderr }
}

/** Kills a command's process group when its timeout (seconds) passes or its job is aborted, and keeps it tracked meanwhile. */
class ChildWatch {
  timedOut = false
  aborted = false
  readonly #timer: NodeJS.Timeout | undefined
  readonly #onAbort = (): void => {
    this.aborted = true
    this.#killGroup()
  }

  constructor(
    private readonly ctx: Pick<JobContext, 'signal' | 'trackChild' | 'untrackChild'>,
    private readonly pid: number | undefined,
    timeoutSeconds: number | undefined,
  ) {
    if (pid !== undefined) ctx.trackChild(pid)
    ctx.signal.addEventListener('abort', this.#onAbort, { once: true })
    if (timeoutSeconds !== undefined && timeoutSeconds > 0) {
      this.#timer = setTimeout(() => {
        this.timedOut = true
        this.#killGroup()
      }, msFromSeconds(timeoutSeconds))
    }
  }

  #killGroup(): void {
    if (this.pid === undefined) return
    try {
      process.kill(-this.pid, 'SIGKILL')
    } catch {
      // Already exited.
    }
  }

  cleanup(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer)
    this.ctx.signal.removeEventListener('abort', this.#onAbort)
    if (this.pid !== undefined) this.ctx.untrackChild(this.pid)
  }
}

function readRunOptions(params: Params, overrides: Partial<RunCommandOptions>): RunCommandOptions {
  for (const name of UNSUPPORTED) {
    const value = params[name]
    if (isSet(value) && value !== false) throw new InvocationError(`cmd option '${name}' is not supported by Brine`)
  }
  const { cmd } = params
  if (typeof cmd !== 'string' && !(Array.isArray(cmd) && cmd.every((word) => typeof word === 'string'))) {
    throw new InvocationError('cmd must be a string or a list of strings')
  }
  const env = params.env
  if (isSet(env) && !isPlainObject(env)) throw new InvocationError("Invalid input for 'env': must be a dict")
  const timeout = params.timeout
  let seconds: number | undefined
  if (isSet(timeout)) {
    seconds = typeof timeout === 'string' ? Number(timeout) : (timeout as number)
    if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) {
      throw new InvocationError(`Error: timeout ${String(timeout)} must be a number`)
    }
  }
  const options: RunCommandOptions = {
    cmd: cmd as string | string[],
    rstrip: params.rstrip !== false,
    cleanEnv: params.clean_env === true,
    ...(isSet(params.python_shell) ? { pythonShell: params.python_shell !== false } : {}),
    ...overrides,
  }
  const cwd = optionalString(params.cwd, 'cwd')
  const stdin = optionalString(params.stdin, 'stdin')
  const runas = optionalString(params.runas, 'runas')
  const shell = optionalString(params.shell, 'shell')
  const prependPath = optionalString(params.prepend_path, 'prepend_path')
  if (cwd !== undefined) options.cwd = cwd
  if (stdin !== undefined) options.stdin = stdin
  if (runas !== undefined && runas !== '') options.runas = runas
  if (shell !== undefined) options.shell = shell
  if (prependPath !== undefined) options.prependPath = prependPath
  if (isSet(env)) options.env = env as Record<string, unknown>
  if (seconds !== undefined) options.timeout = seconds
  return options
}

/**
 * Salt's `_python_shell_default`: an unset python_shell is true for a call that came in a publish (its
 * kwargs carry `__pub_jid`), and false for one made by another module, which gets argv splitting unless
 * it asks for the shell (Salt's `cmd_safe` default).
 */
export function pythonShellDefault(value: unknown, kwargs: Readonly<Record<string, unknown>>): unknown {
  return isSet(value) ? value : isSet(kwargs['__pub_jid'])
}

/** success_retcodes: exit codes that count as success (retcode reported as 0). */
function successRetcodes(value: unknown): number[] {
  if (!isSet(value)) return []
  const list = Array.isArray(value) ? value : [value]
  return list.map((code) => toInt(code, 'success_retcodes'))
}

/** Salt's output_loglevel as one of our levels; `quiet` (nothing logged) is undefined. */
function outputLevel(value: unknown): Exclude<LogLevel, 'quiet'> | undefined {
  if (value === null || value === undefined) return 'debug'
  let level: LogLevel
  try {
    level = parseLogLevel(String(value))
  } catch {
    throw new InvocationError(
      `output_loglevel must be a log level (quiet, error, warning, info, debug, trace), got ${JSON.stringify(String(value).slice(0, 40))}`,
    )
  }
  return level === 'quiet' ? undefined : level
}

/** Logs the command and, after it, its output at output_loglevel, as cmdmod._run does (nothing when quiet). */
function logCommand(ctx: JobContext, level: Exclude<LogLevel, 'quiet'> | undefined, options: RunCommandOptions, result?: CommandResult): void {
  if (level === undefined) return
  const display = typeof options.cmd === 'string' ? options.cmd : options.cmd.join(' ')
  if (result === undefined)
    ctx.logger[level](`Executing command '${display}'${options.runas === undefined ? '' : ` as user '${options.runas}'`} in directory '${options.cwd ?? '~'}'`)
  else if (result.stdout !== '' || result.stderr !== '')
    ctx.logger[level](`output: ${result.stdout}${result.stderr === '' ? '' : `\nstderr: ${result.stderr}`}`)
}

/**
 * Runs a cmd.* command from Salt's named parameters (those of cmd.run; cmd.script passes its own through
 * here) and applies Salt's retcode bookkeeping.
 */
export async function runFor(
  ctx: JobContext,
  params: Partial<Params>,
  overrides: Partial<RunCommandOptions>,
  moduleOptions: CmdModuleOptions,
): Promise<CommandResult> {
  const options = readRunOptions(params as Params, overrides)
  const level = outputLevel(params.output_loglevel)
  logCommand(ctx, level, options)
  const result = await runCommand(ctx, options, moduleOptions)
  logCommand(ctx, params.hide_output === true ? undefined : level, options, result)
  if (result.retcode !== 0 && successRetcodes(params.success_retcodes).includes(result.retcode)) result.retcode = 0
  // cmdmod._run sets __context__['retcode'] so the job's retcode follows the command's.
  ctx.retcode = params.ignore_retcode === true ? 0 : result.retcode
  if (result.retcode !== 0 && params.ignore_retcode !== true && params.output_loglevel !== 'quiet') {
    ctx.logger.error(`Command '${typeof params.cmd === 'string' ? params.cmd : String(params.cmd)}' failed with return code: ${result.retcode}`)
  }
  if (result.retcode !== 0 && params.raise_err === true) {
    throw new CommandExecutionError(params.hide_output === true ? '' : result.stdout, { retcode: result.retcode })
  }
  return result
}

const CMD_DOC_TAIL = `

cmd
    The command to run, e.g. 'ls -lart /home'.
cwd
    Directory to run in (absolute); default: the runas user's home, else '/'.
stdin
    Text written to the command's standard input.
runas
    User to run the command as; the minion must run as root.
shell
    Shell used when python_shell is true (default /bin/sh).
python_shell
    Run through the shell; false splits the command like shlex and execs it. Unset: true for a
    job from the master (brine '*' cmd.run ...), false when another module calls cmd.run.
env
    Dict of environment variables, merged over the minion's unless clean_env is true.
timeout
    Seconds; on expiry the whole process group is killed and the output is
    '<cmd> : Timed out after <timeout> seconds' with retcode 1.
rstrip
    Strip trailing whitespace from the output (default true).
output_loglevel
    Level the command and its output are logged at on the minion (default debug; quiet: not logged).
ignore_retcode
    Do not let a non-zero exit status become the job's retcode.
success_retcodes
    Exit codes to treat as success.`

function runSpec(
  doc: string,
  moduleOptions: CmdModuleOptions,
  finish: (result: CommandResult, params: Params) => unknown,
  overrides: Partial<RunCommandOptions> = {},
  extraArgs: readonly string[] = [],
  extraDefaults: Record<string, unknown> = {},
): ModuleFunctionSpec {
  return {
    doc: doc + CMD_DOC_TAIL,
    args: [...RUN_ARGS, ...extraArgs],
    defaults: { ...RUN_DEFAULTS, ...extraDefaults },
    kwargs: true,
    run: async (args, kwargs, ctx) => {
      const params = toParams(args)
      params.python_shell = pythonShellDefault(params.python_shell, kwargs)
      const extra = Object.fromEntries(extraArgs.map((name, index) => [name, args[RUN_ARGS.length + index]]))
      const resolvedOverrides = { ...overrides }
      if (extra.redirect_stderr === true) resolvedOverrides.redirectStderr = true
      const result = await runFor(ctx, params, resolvedOverrides, moduleOptions)
      // hide_output blanks the output but keeps the rest of the result (pid, retcode).
      return finish(params.hide_output === true ? { ...result, stdout: '', stderr: '' } : result, params)
    },
  }
}

/** Finds an executable on PATH, as cmd.which does. */
function which(command: string, path = process.env.PATH): string | null {
  const candidates = command.includes('/')
    ? [command]
    : (path ?? '')
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => join(dir, command))
  for (const candidate of candidates) {
    try {
      accessSync(candidate, fsConstants.X_OK)
      if (statSync(candidate).isFile()) return candidate
    } catch {
      // Not here; try the next PATH entry.
    }
  }
  return null
}

/** Builds the cmd module; tests pass a `getuid` seam to exercise the runas refusal as root. */
export function createCmdModule(moduleOptions: CmdModuleOptions = {}): ModuleDefinition {
  return {
    run: runSpec(
      "Execute the passed command and return the output as a string (stderr folded into stdout).\n\nCLI Example:\n\n    brine '*' cmd.run \"ls -l | awk '/foo/{print \\$2}'\"",
      moduleOptions,
      (result) => result.stdout,
      { redirectStderr: true },
    ),
    shell: runSpec(
      "Execute the passed command through the shell and return the output as a string.\n\nCLI Example:\n\n    brine '*' cmd.shell 'ls -l | grep foo'",
      moduleOptions,
      (result) => result.stdout,
      { redirectStderr: true, pythonShell: true },
    ),
    run_all: runSpec(
      "Execute the passed command and return a dict of return data: pid, retcode, stdout, stderr.\n\nredirect_stderr\n    Fold stderr into stdout (default false).\n\nCLI Example:\n\n    brine '*' cmd.run_all 'ls -l /tmp'",
      moduleOptions,
      (result) => ({ pid: result.pid, retcode: result.retcode, stdout: result.stdout, stderr: result.stderr }),
      {},
      ['redirect_stderr'],
      { redirect_stderr: false },
    ),
    run_stdout: runSpec(
      "Execute a command, and only return the standard out.\n\nCLI Example:\n\n    brine '*' cmd.run_stdout 'ls -l /tmp'",
      moduleOptions,
      (result) => result.stdout,
    ),
    run_stderr: runSpec(
      "Execute a command and only return the standard error.\n\nCLI Example:\n\n    brine '*' cmd.run_stderr 'ls -l /nonexistent'",
      moduleOptions,
      (result) => result.stderr,
    ),
    retcode: runSpec(
      "Execute a shell command and return the command's return code.\n\nCLI Example:\n\n    brine '*' cmd.retcode 'test -d /tmp'",
      moduleOptions,
      (result) => result.retcode,
    ),
    which: {
      doc: "Returns the path of an executable, or None when it is not on PATH.\n\nCLI Example:\n\n    brine '*' cmd.which cat",
      args: ['cmd'],
      run: async ([command]) => which(String(command)),
    },
    has_exec: {
      doc: "Returns true if the executable is available on the minion, false otherwise.\n\nCLI Example:\n\n    brine '*' cmd.has_exec cat",
      args: ['cmd'],
      run: async ([command]) => which(String(command)) !== null,
    },
  }
}

export const cmdModule: ModuleDefinition = createCmdModule()
