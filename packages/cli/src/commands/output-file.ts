import { closeSync, openSync, writeSync } from 'node:fs'
import { Option, type Command } from 'commander'
import { fail, EXIT_USAGE, type CommandIO, type OutputStream } from '../io.js'

/** `--out-file` as parsed: the path, and whether to append to it. */
export interface OutFileFlags {
  path: string
  append: boolean
}

/** Salt's output-file flags (`--out-file`/`--output-file`, `--out-file-append`/`--output-file-append`). */
export function addOutFileOptions(program: Command): Command {
  return program
    .option('--out-file <path>', "write the outputter's documents to this file instead of stdout (emptied first)")
    .addOption(new Option('--output-file <path>', 'the same as --out-file').hideHelp())
    .option('--out-file-append', 'append to the --out-file instead of emptying it')
    .addOption(new Option('--output-file-append', 'the same as --out-file-append').hideHelp())
}

/** The flags out of commander's options; a message when --out-file-append comes without a file. */
export function readOutFileFlags(options: Record<string, unknown>): OutFileFlags | undefined | string {
  const path = options['outFile'] ?? options['outputFile']
  const append = options['outFileAppend'] === true || options['outputFileAppend'] === true
  if (typeof path === 'string') return { path, append }
  return append ? '--out-file-append needs --out-file <path>' : undefined
}

/** The outputter's documents written to a file, each as it comes: a stream of the run's, closed at its end. */
export interface FileSink extends OutputStream {
  close(): void
}

/**
 * Opens the `--out-file` as Salt does before the job is sent: emptied (its permissions kept), or
 * appended to with `--out-file-append`; created when missing. Writes are synchronous, so each
 * document is in the file before the next return is read. Throws the open's error (ENOENT, EACCES, …).
 */
export function openOutFile(flags: OutFileFlags): FileSink {
  const fd = openSync(flags.path, flags.append ? 'a' : 'w')
  let open = true
  return {
    isTTY: false,
    write(text: string) {
      if (open) writeSync(fd, text)
    },
    close() {
      if (!open) return
      open = false
      closeSync(fd)
    },
  }
}

/**
 * The `--out-file` opened before the command does anything (undefined without one), or an exit code
 * (64, the file named) when it cannot be opened.
 */
export function openDocuments(name: string, flags: OutFileFlags | undefined, io: CommandIO): FileSink | number | undefined {
  if (flags === undefined) return undefined
  try {
    return openOutFile(flags)
  } catch (error) {
    return fail(io, name, `--out-file: cannot open ${flags.path}: ${(error as Error).message}`, EXIT_USAGE)
  }
}
