import { describeTransportCompliance } from '@brine/transport-compliance'
import { sendRawFrames, tcpTransport } from '../src/index.js'

describeTransportCompliance({ name: 'tcp', create: () => tcpTransport(), injectRaw: sendRawFrames })
