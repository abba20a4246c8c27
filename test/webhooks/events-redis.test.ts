// Events delivered by webhooks, on the shared Redis (BullMQ runs the deliveries).
import t from 'tap'
import { eventsSuite } from './events-suite.ts'

eventsSuite(t, 'redis')
