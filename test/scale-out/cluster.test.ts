// Three gateways on a Redis Cluster of three masters with a replica each (127.0.0.1:
// 7100-7105, started by test/helpers/redis-topologies.sh when it is not running).
import t from 'tap'
import { slotsSuite } from './slots.ts'
import { scaleOutSuite } from './suite.ts'

t.setTimeout(540_000)
await scaleOutSuite(t, 'cluster')
// In this file, after the suite: both use the one cluster and the suite kills its masters
// (as a file of its own, run beside this one, its setup restarted a killed master empty).
slotsSuite(t)
