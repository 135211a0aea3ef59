import { describe, expect, it } from 'vitest'
import { emptyCase, stats, type BenchResult, type CaseResult } from '../src/bench.js'
import { targetChecks } from '../src/report.js'

const MiB = 1024 * 1024

/** A case with the figures the targets read; everything else as an unmeasured case has it. */
function caseWith(transport: CaseResult['transport'], n: number, figures: { median?: number; cpuPerReturn?: number; cliMedian?: number }): CaseResult {
  const c = emptyCase({ transport, n, mode: n >= 100 ? 'swarm' : 'procs' })
  c.latency.ms = stats([figures.median ?? 1])
  c.throughput.window = 5
  c.scale.masterCpuMsPerReturn = figures.cpuPerReturn ?? null
  if (figures.cliMedian !== undefined) {
    const cli = stats([figures.cliMedian])
    c.api = {
      postMs: cli,
      cliMs: { ...cli, count: 1 },
      sse: { readers: 0, durationMs: 0, events: 0, eventsPerSec: 0, perReaderEventsPerSec: 0, dropped: 0 },
      apiRssBytes: MiB,
    }
  }
  return c
}

function resultOf(cases: CaseResult[]): BenchResult {
  return {
    version: 1,
    startedAt: '',
    finishedAt: '',
    command: [],
    machine: { cpus: 2, cpuModel: '', totalmemBytes: 0, node: '', os: '' },
    quick: false,
    settings: {} as BenchResult['settings'],
    cases,
    leftoverPids: [],
  }
}

const check = (result: BenchResult, what: string) => targetChecks(result).find((c) => c.what.startsWith(what))

describe("the report's targets (issue 33)", () => {
  it('judges the N=1 median on the socket transports only, against 1.5 ms', () => {
    const within = resultOf([caseWith('tcp', 1, { median: 1.4 }), caseWith('zeromq', 1, { median: 1.2 }), caseWith('nats', 1, { median: 9 })])
    expect(check(within, 'test.ping median, N=1 ')).toEqual({ what: 'test.ping median, N=1 (zeromq, tcp)', target: '≤ 1.5 ms', measured: '1.4 ms', met: true })
    const over = resultOf([caseWith('tcp', 1, { median: 1.4 }), caseWith('zeromq', 1, { median: 2.3 })])
    expect(check(over, 'test.ping median, N=1 ')).toMatchObject({ measured: '2.3 ms', met: false })
  })

  it("judges the `brine` command's median at N=1 against 120 ms", () => {
    expect(check(resultOf([caseWith('tcp', 1, { cliMedian: 243 })]), 'the `brine` command')).toMatchObject({
      target: '≤ 120 ms',
      measured: '243 ms',
      met: false,
    })
    expect(check(resultOf([caseWith('tcp', 1, { cliMedian: 110 })]), 'the `brine` command')).toMatchObject({ met: true })
  })

  it("compares each transport's master CPU per return at N=5,000 with its own at N=100", () => {
    const result = resultOf([
      caseWith('tcp', 100, { cpuPerReturn: 0.2 }),
      caseWith('tcp', 5000, { cpuPerReturn: 0.26 }),
      caseWith('zeromq', 100, { cpuPerReturn: 0.2 }),
      caseWith('zeromq', 5000, { cpuPerReturn: 0.4 }),
      caseWith('nats', 5000, { cpuPerReturn: 0.1 }),
    ])
    expect(check(result, 'tcp: master CPU per return')).toEqual({
      what: 'tcp: master CPU per return, N=5,000 against N=100 (window 5)',
      target: '≤ 1.5×',
      measured: '1.30× (0.260 / 0.200 ms)',
      met: true,
    })
    expect(check(result, 'zeromq: master CPU per return')).toMatchObject({ measured: '2.00× (0.400 / 0.200 ms)', met: false })
    // No N=100 case for nats: nothing to compare with.
    expect(check(result, 'nats: master CPU per return')).toBeUndefined()
  })
})
