import { describeTransportCompliance } from '@brine/transport-compliance'
import { zeromqTransport } from '../src/index.js'
import { connectRaw, sendRawFrames } from './raw.js'

describeTransportCompliance({ name: 'zeromq', create: () => zeromqTransport(), injectRaw: sendRawFrames, connectRaw })
