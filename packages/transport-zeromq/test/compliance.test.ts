import { describeTransportCompliance } from '@brine/transport-compliance'
import { sendRawFrames, zeromqTransport } from '../src/index.js'

describeTransportCompliance({ name: 'zeromq', create: () => zeromqTransport(), injectRaw: sendRawFrames })
