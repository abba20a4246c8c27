// The official openai SDK's files and vector-store methods, pointed at a running Tollgate
// on its default configuration: the built-in mock implements /v1 for real.
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { v1Subject, v1Tests, type V1Subject } from './v1-endpoints.ts'

let subject: V1Subject

t.before(async () => {
  subject = await v1Subject(await startTollgate(), 'v1')
})
t.teardown(async () => {
  await subject.gw.stop()
})

v1Tests(t, () => subject)
