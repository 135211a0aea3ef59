import type { CommandIO } from '../src/io.js'

/** A CommandIO that records what a command wrote. */
export function memoryIO(
  options: { answers?: string[]; signal?: AbortSignal; tty?: boolean; stderrTTY?: boolean } = {},
): CommandIO & { out: () => string; err: () => string } {
  let out = ''
  let err = ''
  const io: CommandIO & { out: () => string; err: () => string } = {
    stdout: { write: (text: string) => (out += text), isTTY: options.tty ?? false },
    stderr: { write: (text: string) => (err += text), isTTY: options.stderrTTY ?? false },
    out: () => out,
    err: () => err,
  }
  if (options.answers !== undefined) {
    const answers = [...options.answers]
    io.prompt = async (question) => {
      out += question
      return answers.shift() ?? ''
    }
  }
  if (options.signal !== undefined) io.signal = options.signal
  return io
}
