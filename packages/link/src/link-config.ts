import {
  backoffFromConfig,
  endpointLimitsFromConfig,
  returnRetryDelayMs,
  timeoutsFromConfig,
  type BrokerConfig,
  type ReconnectConfig,
  type TimeoutConfig,
} from '@brine/config'
import type { MasterLinkOptions } from './master-link.js'

/** The config keys a link's pacing reads: a minion's and a syndic's config both have them. */
export type LinkPacingConfig = TimeoutConfig &
  ReconnectConfig &
  BrokerConfig & { pub_hwm?: number; max_frame_bytes?: number; auth_tries: number; return_retry_tries: number }

/**
 * A link's pacing from config, converted once: the clock skew a publish may have, the clients' reconnect backoff and
 * endpoint limits, the auth waits and tries, and the return retries. The minion's links and the syndic's upper ones share it.
 */
export function linkPacingOf(
  opts: LinkPacingConfig,
): Pick<
  MasterLinkOptions,
  | 'clockSkewMs'
  | 'client'
  | 'authTimeoutMs'
  | 'acceptanceWaitMs'
  | 'acceptanceWaitMaxMs'
  | 'reauthDelayMs'
  | 'authTries'
  | 'returnRetryDelayMs'
  | 'returnRetryTries'
> {
  const timeouts = timeoutsFromConfig(opts)
  return {
    clockSkewMs: timeouts.clockSkewMs,
    client: { reconnect: backoffFromConfig(opts), ...endpointLimitsFromConfig(opts) },
    authTimeoutMs: timeouts.authTimeoutMs,
    acceptanceWaitMs: timeouts.acceptanceWaitTimeMs,
    acceptanceWaitMaxMs: timeouts.acceptanceWaitTimeMaxMs,
    reauthDelayMs: timeouts.randomReauthDelayMs,
    authTries: opts.auth_tries,
    returnRetryDelayMs: () => returnRetryDelayMs(opts),
    returnRetryTries: opts.return_retry_tries,
  }
}
