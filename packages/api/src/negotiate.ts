import { parse as parseYaml, stringify as stringifyYaml } from 'yaml'

/** The response formats, in salt-api's order of preference. */
export const RESPONSE_TYPES = ['application/json', 'application/x-yaml'] as const
export type ResponseType = (typeof RESPONSE_TYPES)[number]

/**
 * The best response type for an `Accept` header (salt-api's `cptools.accept` over JSON and YAML):
 * none or `*\/*` → JSON; `text/yaml` counts as YAML; undefined when the header accepts neither (406).
 */
export function chooseResponseType(accept: string | undefined): ResponseType | undefined {
  if (accept === undefined || accept.trim() === '') return 'application/json'
  let best: { type: ResponseType; q: number } | undefined
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part
      .trim()
      .split(';')
      .map((item) => item.trim())
    const qParam = params.find((param) => param.startsWith('q='))
    const q = qParam === undefined ? 1 : Number(qParam.slice(2))
    if (!Number.isFinite(q) || q <= 0) continue
    const media = range.toLowerCase()
    const candidates: ResponseType[] =
      media === '*/*' || media === 'application/*'
        ? ['application/json']
        : media === 'application/json'
          ? ['application/json']
          : media === 'application/x-yaml' || media === 'text/yaml' || media === 'application/yaml'
            ? ['application/x-yaml']
            : []
    for (const type of candidates) {
      // A specific range beats a wildcard of the same q (RFC 9110).
      const specificity = media.includes('*') ? 0 : 1
      const score = q + specificity * 1e-3
      if (best === undefined || score > best.q) best = { type, q: score }
    }
  }
  return best?.type
}

/** Serialises a response body as `type`. */
export function serialize(body: unknown, type: ResponseType): string {
  // No anchors and aliases: a client reads each value where it stands, as PyYAML's safe_dump writes it for salt-api.
  return type === 'application/x-yaml' ? stringifyYaml(body ?? null, { aliasDuplicateObjects: false }) : JSON.stringify(body ?? null)
}

/** Parses a YAML body; undefined input stays undefined. */
export function parseYamlBody(text: string): unknown {
  return text.trim() === '' ? undefined : parseYaml(text)
}
