import { InvalidArgumentError, Option, type Command } from 'commander'
import { parseInput, secondsToMs, yamlifyArg } from '@brine/config'
import { type TargetType, type Tgt } from '@brine/protocol'
import { parseSubsetSize, SubsetSizeError } from '@brine/client'
import { addBatchOptions, readBatchFlags, type BatchFlags } from './batch-flags.js'
import { addOutFileOptions, readOutFileFlags, type OutFileFlags } from './output-file.js'
import { addEauthOptions, eauthArgs, type EauthArgs } from './eauth.js'
import { isOutputter, OUTPUTTERS, type OutputterName } from '../output/index.js'
import { usageError, type CommandIO } from '../io.js'
import { addCommonOptions, createProgram, integer, nonNegativeSeconds, parseArgv } from '../program.js'

/** Salt's target flags and the tgt_type each selects. */
const TARGET_FLAGS: ReadonlyArray<[flag: string, key: string, type: TargetType, help: string]> = [
  ['-E, --pcre', 'pcre', 'pcre', 'the target is a regular expression on minion ids'],
  ['-G, --grain', 'grain', 'grain', "the target is a grain match, 'key:glob'"],
  ['-P, --grain-pcre', 'grainPcre', 'grain_pcre', "the target is a grain match, 'key:regex'"],
  ['-L, --list', 'list', 'list', 'the target is a comma-separated list of minion ids'],
  ['-C, --compound', 'compound', 'compound', 'the target is a compound expression'],
  ['-N, --nodegroup', 'nodegroup', 'nodegroup', 'the target is a nodegroup name from the master config'],
  ['-S, --ipcidr', 'ipcidr', 'ipcidr', 'the target is an IP address or CIDR subnet'],
]

export interface BrineArgs {
  configDir: string
  logLevel: string
  tgt: Tgt
  tgtType: TargetType
  fun: string
  /** The words after the function, typed as Salt's CLI types them (parse_input): keyword arguments ride in a `__kwarg__` dict. */
  arg: unknown[]
  /** ms, when -t was given. */
  timeout?: number
  out?: OutputterName
  outIndent?: number
  static: boolean
  /** `--summary`: Salt's Summary block after the returns (the master config's `cli_summary` asks for it too). */
  summary: boolean
  /** `--preview-target`: print the minions the target selects instead of running anything. */
  previewTarget: boolean
  /** `--subset`: run on this many of the targeted minions that have the function, picked at random. */
  subset?: number
  /** `--out-file`: where the outputter's documents go instead of stdout. */
  outFile?: OutFileFlags
  async: boolean
  showJid: boolean
  verbose: boolean
  hideTimeout: boolean
  ret?: string
  /** `--metadata`: Salt's job metadata, a mapping. */
  metadata?: Record<string, unknown>
  color?: boolean
  batch: BatchFlags
  /** `-a/--auth`, `-T/--make-token`, `--username`, `--password`. */
  auth: EauthArgs
}

/** `brine`'s commander program: its arguments and every flag. */
function brineProgram(io: CommandIO): Command {
  const program = addCommonOptions(createProgram('brine', io))
    .description("Run a function on the minions matched by a target (Salt's `salt`).")
    // Both are required unless -d makes them optional; the check is ours (positionals), the usage line says so.
    .usage('[options] <target> <function> [arguments...]')
    .argument('[target]', 'which minions (a glob on ids unless a target flag says otherwise)')
    .argument('[function]', 'the execution module function, e.g. test.ping')
    .argument('[arguments...]', "its arguments, typed as Salt types them (1, 2.5, True, None, '[1, 2]', '{a: 1}'); key=value ones are keyword arguments")
    .option('-t, --timeout <seconds>', 'seconds to wait for returns before asking the minions (find_job)', nonNegativeSeconds)
  for (const [flag, , , help] of TARGET_FLAGS) program.option(flag, help)
  program
    .addOption(new Option('--out <outputter>', 'how to print the returns').choices(OUTPUTTERS))
    .option('--out-indent <n>', 'indent for json and yaml output (negative: one line)', integer)
    .option('-s, --static', 'print one document with every return at the end')
    .option('-d, --doc', "print the functions' documentation: sys.doc on the target ('*' if none) for the function given, or all")
    .addOption(new Option('--documentation', 'the same as -d/--doc').hideHelp())
    .option('--summary', "print Salt's summary of the returns at the end (config cli_summary)")
    .option('--preview-target', 'print the minions the target selects (as the master resolves it) and run nothing')
    .option('--subset <n>', 'run on this many of the targeted minions, picked at random among those that have the function', subsetSize)
    .option('--async', 'publish and print the job id without waiting')
    .option('--show-jid', 'print the job id first')
    .option('-v, --verbose', 'print the job id banner and every minion that did not return')
    .option('--hide-timeout', 'do not report minions that did not return')
    .option('--return <returners>', 'returners that also receive the returns')
    .option(
      '--metadata <mapping>',
      "metadata kept with the job and echoed in its returns, e.g. '{ticket: 8}' (jobs.list_jobs search_metadata=)",
      metadataMapping,
    )
    .option('--no-parse <argnames>', 'comma-separated keyword arguments (argname=value) whose values stay strings')
    .option('--no-color', 'never colour the output')
    .option('--force-color', 'colour the output even when it is not a terminal')
  addOutFileOptions(program)
  addBatchOptions(program)
  return addEauthOptions(program)
}

/** Parses `brine`'s argv; returns the arguments, or an exit code when parsing ended the run. */
export function parseBrineArgs(argv: readonly string[], io: CommandIO): BrineArgs | number {
  const program = brineProgram(io)
  const code = parseArgv(program, argv)
  if (code !== undefined) return code
  const options = program.opts<Record<string, unknown>>()
  const words = positionals(program.processedArgs as [string | undefined, string | undefined, string[]], options.doc === true || options.documentation === true)
  if (typeof words === 'string') return usageError(io, 'brine', words, program.usage())
  const [target, fun, rest] = words
  const chosen = TARGET_FLAGS.filter(([, key]) => options[key] === true)
  if (chosen.length > 1) {
    return usageError(io, 'brine', `give at most one target type; got ${chosen.map(([flag]) => flag.split(',')[0]).join(', ')}`, program.usage())
  }
  const tgtType: TargetType = chosen[0]?.[2] ?? 'glob'
  // Salt splits a list target on commas before publishing.
  const tgt: Tgt =
    tgtType === 'list'
      ? target
          .split(',')
          .map((id) => id.trim())
          .filter((id) => id !== '')
      : target
  if (fun === '' || !/^[A-Za-z_][\w.]*$/.test(fun)) {
    return usageError(io, 'brine', `'${fun}' is not a function name (module.function, e.g. test.ping)`, program.usage())
  }
  const batch = readBatchFlags(options, io)
  if (typeof batch === 'number') return batch
  const outFile = readOutFileFlags(options)
  if (typeof outFile === 'string') return usageError(io, 'brine', outFile, program.usage())
  let auth: EauthArgs
  try {
    auth = eauthArgs(options)
  } catch (error) {
    return usageError(io, 'brine', (error as Error).message, program.usage())
  }
  const args: BrineArgs = {
    auth,
    configDir: options.configDir as string,
    logLevel: options.logLevel as string,
    tgt,
    tgtType,
    fun,
    arg: parseInput(rest, { noParse: noParseNames(options.parse) }),
    static: options.static === true,
    summary: options.summary === true,
    previewTarget: options.previewTarget === true,
    async: options.async === true,
    showJid: options.showJid === true,
    verbose: options.verbose === true,
    hideTimeout: options.hideTimeout === true,
    batch,
  }
  if (options.timeout !== undefined) args.timeout = secondsToMs(options.timeout, '--timeout')
  if (typeof options.out === 'string' && isOutputter(options.out)) args.out = options.out
  if (typeof options.outIndent === 'number') args.outIndent = options.outIndent
  if (typeof options.return === 'string') args.ret = options.return
  if (options.metadata !== undefined) args.metadata = options.metadata as Record<string, unknown>
  if (typeof options.subset === 'number') args.subset = options.subset
  if (outFile !== undefined) args.outFile = outFile
  if (options.forceColor === true) args.color = true
  else if (options.color === false) args.color = false
  return args
}

/** Salt's `--no-parse a,b`; commander stores a `--no-*` option with a value under the positive name. */
export function noParseNames(value: unknown): string[] {
  return typeof value === 'string'
    ? value
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name !== '')
    : []
}

/** A commander parser for `--metadata`: Salt types the word as YAML; only a mapping means anything to a minion (Salt's ignores the rest). */
function metadataMapping(value: string): Record<string, unknown> {
  const typed = yamlifyArg(value)
  if (typeof typed === 'object' && typed !== null && !Array.isArray(typed)) return typed as Record<string, unknown>
  throw new InvalidArgumentError("give a mapping, e.g. '{ticket: 8, owner: ops}'")
}

/** A commander parser for `--subset`: a whole number of minions, at least 1. */
function subsetSize(value: string): number {
  try {
    return parseSubsetSize(value, '--subset')
  } catch (error) {
    if (error instanceof SubsetSizeError) throw new InvalidArgumentError('give a whole number of minions, at least 1')
    throw error
  }
}

/**
 * The target, the function and its arguments; an error message when one is missing. With `-d`, Salt's
 * rewrite: the target defaults to '*', `sys.doc` goes in as the function, and what was the function
 * becomes its one argument (`brine -d web1 test.ping` runs `sys.doc test.ping` on web1).
 */
function positionals([target, fun, rest]: [string | undefined, string | undefined, string[]], doc: boolean): [string, string, string[]] | string {
  if (!doc) {
    if (target === undefined) return "missing required argument 'target'"
    if (fun === undefined) return "missing required argument 'function'"
    return [target, fun, rest]
  }
  const words = [target ?? '*', ...(fun === undefined ? [] : [fun]), ...rest]
  if (words[1] !== 'sys.doc') words.splice(1, 0, 'sys.doc')
  if (words.length > 3) return 'You can only get documentation for one method at one time.'
  return [words[0]!, words[1]!, words.slice(2)]
}
