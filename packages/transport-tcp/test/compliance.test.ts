import { describeTransportCompliance } from '@brine/transport-compliance'
import { tcpTransport } from '../src/index.js'
import { connectRaw, sendRawFrames } from './raw.js'

describeTransportCompliance({ name: 'tcp', create: () => tcpTransport(), injectRaw: sendRawFrames, connectRaw })
