import { join } from 'node:path'
import {
  backoffFromConfig,
  endpointLimitsFromConfig,
  masterAddressOf,
  masterFingerFor,
  mastersOf,
  returnRetryDelayMs,
  timeoutsFromConfig,
  type MinionConfig,
} from '@brine/config'
import { masterAddressStem, masterPinFile, type KeyPair } from '@brine/crypt'
import { linkPacingOf, spoolDir, type MasterLinkOptions } from '@brine/link'
import { type Transport } from '@brine/transport'

/** What a link to one master needs beside the minion's config. */
export interface LinkParts {
  id: string
  keys: KeyPair
  transport: Transport
  /** Whether the minion has several masters: each then has its own pin file and spool. */
  several: boolean
}

/**
 * The {@link MasterLinkOptions} a minion's config gives the link to the entry at `index` of `master`: the master's
 * address (`host:port` as Salt reads it, else `master_port`), its pacing ({@link linkPacingOf}), its pin file, `master_finger` and spool. With several masters each has its own pin file
 * (`minion_master-<host>-<port>.pub`), spool (`<cachedir>/minion/spool/<host>-<port>/`) and `master_finger`; a
 * single master keeps Salt's `minion_master.pub` and the spool directory itself. The daemon and `brine-call` share it.
 */
export function linkOptionsOf(opts: MinionConfig, entry: string, index: number, parts: LinkParts): MasterLinkOptions {
  // On NATS the port is what tells masters on one cluster apart.
  const { host, port } = masterAddressOf(entry, opts.master_port)!
  const masterFinger = masterFingerFor(opts.master_finger, mastersOf(opts), index)
  return {
    id: parts.id,
    keys: parts.keys,
    transport: parts.transport,
    host,
    port,
    // Set in config it overrides what the master's auth reply names; absent, the link subscribes where the master says.
    ...(opts.publish_port === undefined ? {} : { publishPort: opts.publish_port }),
    ...linkPacingOf(opts),
    pkiDir: opts.pki_dir,
    ...(parts.several ? { pinFile: masterPinFile(host, port) } : {}),
    ...(masterFinger === '' ? {} : { masterFinger }),
    spoolDir: parts.several ? join(spoolDir(opts.cachedir), masterAddressStem(host, port)) : spoolDir(opts.cachedir),
  }
}
