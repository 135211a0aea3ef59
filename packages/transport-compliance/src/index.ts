/**
 * @packageDocumentation
 * `@brine/transport-compliance` is the one conformance suite every Brine transport runs against itself:
 * request/reply, concurrency, timeouts and retries, handler failure, broadcast and targeted publish,
 * reconnect after a server restart, size limits, malformed input, the high-water mark and close. A
 * transport package calls {@link describeTransportCompliance} from a one-line test file; the suite never
 * imports a transport, so both run exactly the same cases.
 */
import { afterEach, describe } from 'vitest'
import { createHarness } from './harness/index.js'
import type { ComplianceSetup } from './setup.js'
import { closeTests } from './suites/close.js'
import { doorTests } from './suites/doors.js'
import { hardeningTests } from './suites/hardening.js'
import { limitTests } from './suites/limits.js'
import { malformedInputTests } from './suites/malformed-input.js'
import { publishTests } from './suites/publish.js'
import { reconnectTests } from './suites/reconnect.js'
import { requestLimitTests } from './suites/request-limits.js'
import { requestReplyTests } from './suites/request-reply.js'

export type { BrokerCompliance, ComplianceCase, ComplianceSetup, RawConnection, RawTarget } from './setup.js'
/** Re-exported from `@brine/testkit` for the tests that import them from here. */
export { deadline, deferred, until, DeadlineError } from '@brine/testkit'
export { Recorder } from './harness/recorder.js'
export { connectRawSocket, type RawFraming } from './harness/raw-socket.js'
export { createHarness, type Harness } from './harness/index.js'

export function describeTransportCompliance(setup: ComplianceSetup): void {
  describe(`transport compliance: ${setup.name}`, () => {
    const harness = createHarness(setup)
    afterEach(() => harness.cleanup())
    requestReplyTests(harness)
    publishTests(harness)
    reconnectTests(harness)
    limitTests(harness)
    requestLimitTests(harness)
    malformedInputTests(harness)
    closeTests(harness)
    hardeningTests(harness)
    doorTests(harness)
  })
}
