/**
 * Renders a value the way Salt's `nested` outputter lays it out: mappings as `key:` with their values
 * indented four spaces below, lists as `- item` lines, scalars on their own line. Text only (the page
 * colours nothing), so it can be copied and compared with the CLI's output.
 */
export function renderNested(value: unknown, indent = 0): string {
  return lines(value, indent).join('\n')
}

const pad = (indent: number): string => ' '.repeat(indent)

function scalar(value: unknown): string {
  if (value === null || value === undefined) return 'None'
  if (value === true) return 'True'
  if (value === false) return 'False'
  return String(value)
}

function lines(value: unknown, indent: number): string[] {
  if (Array.isArray(value)) {
    if (value.length === 0) return [`${pad(indent)}`]
    return value.flatMap((item) => {
      if (typeof item === 'object' && item !== null) return [`${pad(indent)}|_`, ...lines(item, indent + 2)]
      return [`${pad(indent)}- ${scalar(item)}`]
    })
  }
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
    if (entries.length === 0) return [`${pad(indent)}`]
    return entries.flatMap(([key, item]) => {
      if (typeof item === 'object' && item !== null) return [`${pad(indent)}${key}:`, ...lines(item, indent + 4)]
      const text = scalar(item)
      // Multi-line strings (command output) go under their key, as Salt prints them.
      if (text.includes('\n')) return [`${pad(indent)}${key}:`, ...text.split('\n').map((line) => `${pad(indent + 4)}${line}`)]
      return [`${pad(indent)}${key}:`, `${pad(indent + 4)}${text}`]
    })
  }
  return scalar(value)
    .split('\n')
    .map((line) => `${pad(indent)}${line}`)
}
