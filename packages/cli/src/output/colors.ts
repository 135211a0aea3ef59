/**
 * Salt's terminal colours (salt.utils.color.get_colors): each is a TextFormat, an SGR sequence
 * that starts with a reset (`\x1b[0;32m` is green, `\x1b[0;1;33m` bold yellow, `\x1b[0;0m` the end
 * of a colour). Off, every colour is the empty string.
 */
const sgr = (...codes: number[]): string => `\x1b[${[0, ...codes].join(';')}m`

export const SALT_COLORS = {
  BLACK: sgr(30),
  DARK_GRAY: sgr(1, 30),
  RED: sgr(31),
  LIGHT_RED: sgr(1, 31),
  GREEN: sgr(32),
  LIGHT_GREEN: sgr(1, 32),
  YELLOW: sgr(33),
  LIGHT_YELLOW: sgr(1, 33),
  BLUE: sgr(34),
  LIGHT_BLUE: sgr(1, 34),
  MAGENTA: sgr(35),
  LIGHT_MAGENTA: sgr(1, 35),
  CYAN: sgr(36),
  LIGHT_CYAN: sgr(1, 36),
  LIGHT_GRAY: sgr(37),
  WHITE: sgr(1, 37),
  DEFAULT_COLOR: sgr(39),
  ENDC: sgr(0),
} as const

export type Colors = { readonly [name in keyof typeof SALT_COLORS]: string }

const NO_COLORS = Object.fromEntries(Object.keys(SALT_COLORS).map((name) => [name, ''])) as unknown as Colors

/** get_colors(use): Salt's colours, or all empty. */
export function getColors(use: boolean | undefined): Colors {
  return use === true ? SALT_COLORS : NO_COLORS
}

/** salt.output.strip_esc_sequence: an ESC a minion printed becomes `?`, so it cannot drive the terminal. */
export function stripEscSequence(text: string): string {
  return text.replaceAll('\x1b', '?')
}
