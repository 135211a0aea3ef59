/** What the Run page sends: Salt's lowstate fields for the `local` clients. */
export interface RunRequest {
  tgt: string
  tgtType: TargetType
  fun: string
  /** The arguments box as typed (see parseArgs). */
  args: string
  async: boolean
  /** Salt's batch size: a count or a percentage; '' for none. */
  batch: string
}

export const TARGET_TYPES = ['glob', 'list', 'grain', 'grain_pcre', 'pcre', 'compound', 'nodegroup', 'ipcidr'] as const
export type TargetType = (typeof TARGET_TYPES)[number]

/** The `brine` (salt) command-line flag of each target type. */
const FLAGS: Record<TargetType, string | undefined> = {
  glob: undefined,
  list: '-L',
  grain: '-G',
  grain_pcre: '--grain-pcre',
  pcre: '-E',
  compound: '-C',
  nodegroup: '-N',
  ipcidr: '-S',
}

/** A word quoted for a POSIX shell when it needs it. */
export function shellQuote(word: string): string {
  if (word !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word
  return `'${word.replace(/'/g, `'\\''`)}'`
}

/** The `brine` command that runs the same job from a shell. */
export function brineCommand(request: RunRequest, splitWords: (text: string) => string[]): string {
  const parts = ['brine']
  const flag = FLAGS[request.tgtType]
  if (flag !== undefined) parts.push(flag)
  if (request.batch.trim() !== '') parts.push('-b', shellQuote(request.batch.trim()))
  if (request.async) parts.push('--async')
  parts.push(shellQuote(request.tgt), shellQuote(request.fun))
  for (const word of splitWords(request.args)) parts.push(shellQuote(word))
  return parts.join(' ')
}
