// Three gateways on a Redis Cluster of three masters with a replica each (127.0.0.1:
// 7100-7105, started by test/helpers/redis-topologies.sh when it is not running).
import t from 'tap'
import { scaleOutSuite } from './suite.ts'

t.setTimeout(420_000)
await scaleOutSuite(t, 'cluster')
