import { afterAll, afterEach } from 'vitest'
import { MasterEvent, WheelClient } from '@brine/client'
import { tags } from '@brine/protocol'
import { killAllProcesses } from '@brine/testkit'
import { Fleet, type FleetOptions, type TransportName } from '@brine/harness'

export const TRANSPORTS: TransportName[] = ['zeromq', 'tcp', 'nats']

/** How e2e fleets read the master's bus: through the client's MasterEvent. */
export const bus: FleetOptions['bus'] = { open: (busOptions) => new MasterEvent(busOptions), tags }

/**
 * The harness's own key operations (a syndic node's `--accept-syndic` on its upper master) as wheel calls from the test
 * process: the same wheel function `brine-key` calls, without a process per syndic (syndic-refusals runs the command).
 */
export const wheel: FleetOptions['wheel'] = (options) => new WheelClient(options)

/**
 * A syndic's return retry delay in these files: 0.2–0.5 s instead of the harness's 1–2 s. The syndic's first start event
 * is refused until the upper master has marked its key (the harness does, at once) and is asked again after that
 * delay, which every syndic fleet waited; the same delay spaces the sends of a spooled batch to an upper master that
 * was away. What the files check is that these arrive, once, not when. The harness keeps its own for the bench.
 */
const QUICK_SYNDIC = { return_retry_timer: 0.2, return_retry_timer_max: 0.5 }

/** `options` with {@link QUICK_SYNDIC} under whatever syndic config the test gives. */
function quickSyndic(options: Omit<FleetOptions, 'bus'>): Omit<FleetOptions, 'bus'> {
  const { syndic } = options
  return syndic === undefined ? options : { ...options, syndic: { ...syndic, config: { ...QUICK_SYNDIC, ...syndic.config } } }
}

/**
 * Registers teardown for the calling test file — every fleet a test started is stopped after it, and every
 * process the test kit started is killed by pid after the file — and returns the function that starts one,
 * reading the master's bus through the client's MasterEvent and making its wheel calls through its WheelClient.
 */
export function useFleets(beforeStop: () => Promise<void> = async () => {}): (options: Omit<FleetOptions, 'bus'>) => Promise<Fleet> {
  const fleets: Fleet[] = []
  afterEach(async () => {
    await beforeStop()
    for (const fleet of fleets.splice(0)) await fleet.stop()
  })
  afterAll(() => killAllProcesses())
  return async (options) => {
    const fleet = await Fleet.start({ ...quickSyndic(options), bus, wheel })
    fleets.push(fleet)
    return fleet
  }
}

/**
 * For a describe whose tests share fleets they do not disturb: call it inside the describe; the fleets started
 * through it are stopped after the describe's last test instead of after each test.
 */
export function useSharedFleets(beforeStop: () => Promise<void> = async () => {}): (options: Omit<FleetOptions, 'bus'>) => Promise<Fleet> {
  const fleets: Fleet[] = []
  afterAll(async () => {
    await beforeStop()
    for (const fleet of fleets.splice(0)) await fleet.stop()
  })
  return async (options) => {
    const fleet = await Fleet.start({ ...quickSyndic(options), bus, wheel })
    fleets.push(fleet)
    return fleet
  }
}
