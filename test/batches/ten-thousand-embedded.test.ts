// A 10,000-line batch on the embedded store (ten-thousand.ts says what is checked).
import t from 'tap'
import { suite } from './ten-thousand.ts'

t.test('embedded store', (t) => suite(t, {}))
