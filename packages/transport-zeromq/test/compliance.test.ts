import { describeTransportCompliance } from '@brine/transport-compliance'
import { zeromqTransport } from '../src/index.js'
import { sendRawFrames } from './raw.js'

describeTransportCompliance({ name: 'zeromq', create: () => zeromqTransport(), injectRaw: sendRawFrames })
