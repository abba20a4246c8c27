// Three gateways on a master watched by Sentinel (master name "tollgate", sentinels
// 127.0.0.1:27200-27202; started by test/helpers/redis-topologies.sh when not running).
import t from 'tap'
import { scaleOutSuite } from './suite.ts'

t.setTimeout(240_000)
await scaleOutSuite(t, 'sentinel')
