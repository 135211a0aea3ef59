import { stringify } from 'yaml'

/** Salt's `yaml` outputter (PyYAML block style, lists not indented under their key). */
export function yamlOutput(data: unknown, options: { indent?: number } = {}): string {
  return stringify(data ?? null, { indent: options.indent !== undefined && options.indent > 0 ? options.indent : 2, indentSeq: false, lineWidth: 0 })
}
