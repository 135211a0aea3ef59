/**
 * The arguments box, read as the `brine` command line reads its arguments: words split on blanks (quotes
 * keep blanks), `key=value` words are keyword arguments, and each value is typed as Salt's yamlify_arg
 * types it for the simple cases (true/false, None/null, integers, decimals); everything else stays text.
 */
export interface ParsedArgs {
  arg: unknown[]
  kwarg: Record<string, unknown>
}

export function splitWords(text: string): string[] {
  const words: string[] = []
  let current = ''
  let quote: string | undefined
  let started = false
  for (const char of text) {
    if (quote !== undefined) {
      if (char === quote) quote = undefined
      else current += char
    } else if (char === '"' || char === "'") {
      quote = char
      started = true
    } else if (/\s/.test(char)) {
      if (started) words.push(current)
      current = ''
      started = false
    } else {
      current += char
      started = true
    }
  }
  if (started) words.push(current)
  return words
}

export function typeArg(word: string): unknown {
  if (/^(true|True)$/.test(word)) return true
  if (/^(false|False)$/.test(word)) return false
  if (/^(null|None|~)$/.test(word)) return null
  if (/^-?\d+$/.test(word) && Number.isSafeInteger(Number(word))) return Number(word)
  if (/^-?\d+\.\d+$/.test(word)) return Number(word)
  return word
}

export function parseArgs(text: string): ParsedArgs {
  const out: ParsedArgs = { arg: [], kwarg: {} }
  for (const word of splitWords(text)) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(word)
    if (match !== null) out.kwarg[match[1]!] = typeArg(match[2]!)
    else out.arg.push(typeArg(word))
  }
  return out
}
