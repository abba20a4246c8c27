// A 10,000-line batch on Redis (ten-thousand.ts says what is checked).
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { onSharedRedis } from '../helpers/gateway.ts'
import { suite } from './ten-thousand.ts'

t.test('redis store', (t) => suite(t, onSharedRedis(`tgtest-batch10k-${randomBytes(4).toString('hex')}:`)))
