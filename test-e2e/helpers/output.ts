/** Reading what the built CLIs print. */

/** `--out json` output as one object. */
export const json = (stdout: string): Record<string, unknown> => JSON.parse(stdout) as Record<string, unknown>

/** The jid `brine` printed (`--show-jid`, `-v` or `--async`). */
export function jidOf(stdout: string): string {
  const match = /(?:jid: |job ID: )(\d{20})/.exec(stdout)
  if (match === null) throw new Error(`no jid in:\n${stdout}`)
  return match[1]!
}
