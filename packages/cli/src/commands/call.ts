import { Option, type Command } from 'commander'
import { fileServerLimitsFromConfig, loadConfig, parseInput, parseOverride, type MinionConfig } from '@brine/config'
import { FILE_COMMANDS, generateJid, type FileCommand } from '@brine/protocol'
import { fileServerFromConfig } from '@brine/master'
import { collectGrains, createModuleRegistry, executeJob, reloadCustomModules, RunningJobs, type MasterChannel, type ModuleRegistry } from '@brine/minion'
import { NotAcknowledgedError } from '@brine/link'
import { serializeError, type Logger } from '@brine/core'
import { OUTPUTTERS, outputSettings, renderOutput, type OutputFlags } from '../output/index.js'
import { noParseNames } from './brine-args.js'
import { addOutFileOptions, openDocuments, readOutFileFlags } from './output-file.js'
import { connectCallMaster } from './call-master.js'
import { cliLogger, EXIT_GENERIC, EXIT_NO_MINIONS, usageError, type CommandIO } from '../io.js'
import { addCommonOptions, createProgram, integer, parseArgv } from '../program.js'
import { CallAuthError } from '../errors.js'

/**
 * Salt's `file_client: local`: `salt://` is read from this machine's own `file_roots`, through the same file
 * server the master runs (confinement included), and refused as the master would refuse it.
 */
function localFileChannel(opts: MinionConfig): MasterChannel {
  const files = fileServerFromConfig(opts, fileServerLimitsFromConfig(opts))
  return {
    request: async (load) => {
      try {
        if (!(FILE_COMMANDS as readonly string[]).includes(load.cmd)) throw new Error(`${load.cmd} needs a master (brine-call runs --local)`)
        return { ok: true, ...(await files.handle(opts.id, load.cmd as FileCommand, load)) }
      } catch (error) {
        const serialized = serializeError(error)
        throw new NotAcknowledgedError(load.cmd, serialized.message, { refusal: serialized.name, error: serialized })
      }
    },
  }
}

/**
 * `brine-call [--local] <function> [arguments...]`: runs an execution module in this process, with the minion's
 * config and grains, prints `local:` and the return, and exits with the job's retcode. With `--local`, `salt://`
 * files come from the minion's own `file_roots` (Salt's `file_client: local`); without it, from the master, which
 * `brine-call` authenticates with as the minion (its keys, a link that only makes requests), and events the
 * function fires go to the master's bus. Nothing is returned to the master, as with Salt's salt-call.
 */
export async function runCall(argv: readonly string[], io: CommandIO): Promise<number> {
  const program = callProgram(io)
  const code = parseArgv(program, argv)
  if (code !== undefined) return code
  const o = program.opts<Record<string, unknown>>()
  const [fun, args] = program.processedArgs as [string, string[]]
  const outFile = readOutFileFlags(o)
  if (typeof outFile === 'string') return usageError(io, 'brine-call', outFile, program.usage())
  const file = openDocuments('brine-call', outFile, io)
  if (typeof file === 'number') return file
  const logger = cliLogger(String(o.logLevel), io, 'brine-call')
  const controller = new AbortController()
  const onAbort = (): void => controller.abort(io.signal?.reason)
  io.signal?.addEventListener('abort', onAbort, { once: true })
  let modules: CallModules | undefined
  try {
    const { opts } = await loadConfig('minion', { configDir: String(o.configDir), overrides: overridesOf(o), logger })
    modules = await callModules(opts, o.local === true, logger, controller.signal)
    const result = await executeJob(modules.registry, {
      jid: generateJid(),
      fun,
      arg: parseInput(args, { noParse: noParseNames(o.parse) }),
      user: 'root',
      tgt: opts.id,
      tgt_type: 'glob',
    })
    const flags: OutputFlags = {}
    if (typeof o.out === 'string') flags.out = o.out
    if (typeof o.outIndent === 'number') flags.outIndent = o.outIndent
    if (o.forceColor === true) flags.color = true
    else if (o.color === false) flags.color = false
    const output = outputSettings(opts, flags, file === undefined && io.stdout.isTTY === true)
    ;(file ?? io.stdout).write(
      renderOutput(
        output.out ?? result.out ?? 'nested',
        { local: result.return },
        { color: output.color, indent: output.indent, stripColors: output.stripColors, retcode: result.retcode },
      ),
    )
    // Exit statuses are one byte; a retcode of 256 must not look like success.
    return result.retcode === 0 ? 0 : Math.min(Math.max(result.retcode, 1), 255)
  } catch (error) {
    io.stderr.write(`brine-call: ${(error as Error).message}\n`)
    // Salt's salt-call exits 2 when it cannot authenticate with its master.
    return error instanceof CallAuthError ? EXIT_NO_MINIONS : EXIT_GENERIC
  } finally {
    io.signal?.removeEventListener('abort', onAbort)
    file?.close()
    await modules?.close()
  }
}

function callProgram(io: CommandIO): Command {
  const program = addCommonOptions(createProgram('brine-call', io))
    .description("Run an execution module function on this machine (Salt's `salt-call`).")
    .argument('<function>', 'the function, e.g. test.ping')
    .argument('[arguments...]', "its arguments, typed as Salt types them (1, 2.5, True, None, '[1, 2]', '{a: 1}'); key=value ones are keyword arguments")
    .option('--local', "run without contacting a master (salt:// from this machine's file_roots)")
    .option('--id <id>', 'the minion id to run as (default: the config id)')
    .option('--set <key=value>', 'set any minion config key (repeatable)', (value: string, previous: string[]) => [...previous, value], [] as string[])
    .option('--no-parse <argnames>', 'comma-separated keyword arguments (argname=value) whose values stay strings')
    .addOption(new Option('--out <outputter>', 'how to print the return').choices(OUTPUTTERS))
    .option('--out-indent <n>', 'indent for json and yaml output', integer)
    .option('--no-color', 'never colour the output')
    .option('--force-color', 'colour the output even when it is not a terminal')
  addOutFileOptions(program)
  return program
}

/** `--set key=value` and `--id`, as config overrides. */
function overridesOf(o: Record<string, unknown>): Record<string, unknown> {
  const overrides: Record<string, unknown> = {}
  for (const text of o.set as string[]) {
    const { key, value } = parseOverride(text)
    overrides[key] = value
  }
  if (typeof o.id === 'string') overrides.id = o.id
  return overrides
}

interface CallModules {
  registry: ModuleRegistry
  close(): Promise<void>
}

/** The minion's modules for one call: its grains, and the master (or, `--local`, this machine's file_roots) behind them. */
async function callModules(opts: MinionConfig, local: boolean, logger: Logger, signal: AbortSignal): Promise<CallModules> {
  const grains = await collectGrains(opts.id, opts)
  const remote = local ? undefined : await connectCallMaster(opts, logger, signal)
  try {
    const registry = createModuleRegistry({
      id: opts.id,
      grains,
      opts,
      logger,
      jobs: new RunningJobs(),
      signal,
      master: remote?.channel ?? localFileChannel(opts),
      ...(remote === undefined ? {} : { fireMaster: remote.fireMaster }),
    })
    // As salt-call does: the modules synced before and those of module_dirs are there too.
    await reloadCustomModules(registry, opts, logger)
    return { registry, close: async () => remote?.close() }
  } catch (error) {
    await remote?.close()
    throw error
  }
}
