import { describe, expect, it } from 'vitest'
import { JidError } from '../src/errors.js'
import { createJidGenerator, createJidState, generateJid, isJid, isSaltJid, jidMillis, jidToDate, jidToTime, parseJid } from '../src/jid.js'

describe('jid', () => {
  it("reads a jid's time in ms, the same asked twice, and refuses a bad jid every time, even right after a good one", () => {
    expect(jidMillis('20240229030405678000')).toBe(Date.parse('2024-02-29T03:04:05.678Z'))
    expect(jidMillis('20240229030405678000')).toBe(Date.parse('2024-02-29T03:04:05.678Z'))
    expect(jidMillis('20240301000000000999')).toBe(Date.parse('2024-03-01T00:00:00.000Z'))
    expect(() => jidMillis('20240230000000000000')).toThrow(JidError)
    expect(() => jidMillis('20240230000000000000')).toThrow(/not a valid date and time/)
    expect(jidToDate('20240301000000000999').toISOString()).toBe('2024-03-01T00:00:00.000Z')
  })

  it('formats a date as YYYYMMDDhhmmssffffff in UTC', () => {
    const next = createJidGenerator()
    expect(next(new Date('2024-02-29T03:04:05.678Z'))).toBe('20240229030405678000')
  })

  it('bumps by one microsecond when the clock repeats or goes back', () => {
    const next = createJidGenerator()
    const at = new Date('2024-01-01T00:00:00.000Z')
    expect([next(at), next(at), next(new Date('2023-12-31T23:59:59.999Z'))]).toEqual(['20240101000000000000', '20240101000000000001', '20240101000000000002'])
  })

  it('rolls the bump over a second boundary correctly', () => {
    const next = createJidGenerator()
    const at = new Date('2024-01-01T00:00:00.999Z')
    for (let i = 0; i < 999; i++) next(at)
    expect(next(at)).toBe('20240101000000999999')
    expect(next(at)).toBe('20240101000001000000')
  })

  it('never repeats over 10,000 calls in a tight loop, and keeps increasing', () => {
    const jids: string[] = []
    for (let i = 0; i < 10_000; i++) jids.push(generateJid())
    expect(new Set(jids).size).toBe(10_000)
    expect(jids.every((jid, index) => index === 0 || jid > (jids[index - 1] as string))).toBe(true)
    expect(jids.every((jid) => /^\d{20}$/.test(jid))).toBe(true)
  })

  it('stays unique across generators that share state (one per worker thread)', () => {
    const state = createJidState()
    const [a, b] = [createJidGenerator(state), createJidGenerator(state)]
    const at = new Date('2024-01-01T00:00:00.000Z')
    expect([a(at), b(at), a(at), b(new Date('2024-01-01T00:00:00.001Z'))]).toEqual([
      '20240101000000000000',
      '20240101000000000001',
      '20240101000000000002',
      '20240101000000001000',
    ])
    const separate = [createJidGenerator(), createJidGenerator()].map((next) => next(at))
    expect(separate[0]).toBe(separate[1])
  })

  it('parses back to its time', () => {
    expect(parseJid('20240229030405678912')).toEqual({ date: new Date('2024-02-29T03:04:05.678Z'), microsecond: 678912 })
    expect(jidToDate('20240229030405678912').toISOString()).toBe('2024-02-29T03:04:05.678Z')
  })

  it.each([
    ['20240229030405678912', true],
    ['20240229030405678912_4242', true],
    ['2024022903040567891', false],
    ['202402290304056789123', false],
    ['20230229030405678912', false],
    ['20241301000000000000', false],
    ['20240101246000000000', false],
    ['2024-02-29T03:04:05Z', false],
    [20240229030405678912, false],
  ])('isJid(%j) is %s', (value, expected) => {
    expect(isJid(value)).toBe(expected)
  })

  it('names the bad jid', () => {
    expect(() => parseJid('20230229030405678912')).toThrow(JidError)
    expect(() => parseJid('20230229030405678912')).toThrow("invalid jid '20230229030405678912': not a valid date and time")
    expect(() => parseJid('abc')).toThrow("invalid jid 'abc': expected 20 digits, YYYYMMDDhhmmssffffff")
  })
})

// Salt's own cases (tests/pytests/unit/utils/test_jid.py), then the corners of its rules.
describe("Salt's jid helpers (salt.utils.jid)", () => {
  it('jid_to_time reads a jid (also given as a number) and answers an empty string for anything else', () => {
    expect(jidToTime(20131219110700123489n)).toBe('2013, Dec 19 11:07:00.123489')
    expect(jidToTime('20131219110700123489')).toBe('2013, Dec 19 11:07:00.123489')
    expect(jidToTime(2012)).toBe('')
    expect(jidToTime('20131219110700123489_4242')).toBe('2013, Dec 19 11:07:00.123489')
    // Salt reads the digits as they are: no calendar check, month 00 has an empty name, a 13th month is not a jid.
    expect(jidToTime('20130231250000000000')).toBe('2013, Feb 31 25:00:00.000000')
    expect(jidToTime('20130019110700123489')).toBe('2013,  19 11:07:00.123489')
    expect(jidToTime('20131319110700123489')).toBe('')
    expect(jidToTime('2013121911070012348_')).toBe('')
    expect(jidToTime('20131219110700123489_')).toBe('')
    expect(jidToTime(undefined)).toBe('')
  })

  it('is_jid accepts and refuses what Salt does', () => {
    expect(isSaltJid('20131219110700123489')).toBe(true)
    expect(isSaltJid(20131219110700123489n)).toBe(false)
    expect(isSaltJid(20131219110700123489)).toBe(false)
    expect(isSaltJid('2013121911070012348911111')).toBe(false)
    expect(isSaltJid('20131219110700123489_1234')).toBe(true)
    expect(isSaltJid('20131219110700123489_')).toBe(false)
    expect(isSaltJid('20131219110700123489x1')).toBe(false)
    // Python's int() takes a sign, blanks around and single underscores between digits; not a letter.
    expect(isSaltJid('-0131219110700123489')).toBe(true)
    expect(isSaltJid(' 0131219110700123489')).toBe(true)
    expect(isSaltJid('2013_219110700123489')).toBe(true)
    expect(isSaltJid('2013__19110700123489')).toBe(false)
    expect(isSaltJid('2013121911070012348a')).toBe(false)
    // Python counts code points and int() reads any decimal digit: 20 mathematical (astral) digits are a jid.
    expect(isSaltJid('𝟐'.repeat(20))).toBe(true)
    expect(isSaltJid('٢'.repeat(20))).toBe(true)
    // What Salt accepts and the master's protocol check refuses: not a real time.
    expect(isSaltJid('20139999999999999999')).toBe(true)
    expect(isJid('20139999999999999999')).toBe(false)
  })

  it('unique_jid appends _<pid>, and the jids still increase', () => {
    const generate = createJidGenerator()
    const at = new Date(Date.UTC(2002, 11, 25, 12, 0, 0, 0))
    expect(generate(at)).toBe('20021225120000000000')
    expect(generate(at, { unique: true })).toBe(`20021225120000000001_${process.pid}`)
    expect(generate(at, { unique: true })).toBe(`20021225120000000002_${process.pid}`)
    expect(isJid(generate(at, { unique: true }))).toBe(true)
    expect(generateJid(undefined, { unique: true })).toMatch(new RegExp(`^\\d{20}_${process.pid}$`))
  })
})
