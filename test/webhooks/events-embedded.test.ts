// Events delivered by webhooks, on the embedded store.
import t from 'tap'
import { eventsSuite } from './events-suite.ts'

eventsSuite(t, 'embedded')
