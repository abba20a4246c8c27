// Where a batch's line stands from the queue's answer (src/batches/line-state.ts): a 404 is
// "never taken" only for a line the queue never took; one it took and purged ends as an
// error and is never submitted again (it would run, and be charged, twice). An ended request
// without a reply gets a code that says what happened.
import t from 'tap'
import { lineState, resultOf } from '../../src/batches/line-state.ts'

const chosen = { queueId: 'qreq_1', submitted: false }
const taken = { queueId: 'qreq_1', submitted: true }
const before = { queueId: 'qreq_1' } // kept before `submitted` was recorded

t.test('a 404: submitted again only if the queue never took it', async (t) => {
  t.same(lineState(chosen, null, false), { kind: 'submit' }, 'chosen, never taken: submitted')
  t.same(lineState(before, null, false), { kind: 'submit' }, 'a line of an older gateway: as before')
  t.match(
    lineState(taken, null, false),
    { kind: 'ended', result: { kind: 'error', code: 'result_expired' } },
    'taken and purged: an error, not run again',
  )
  t.match(lineState(taken, null, true), { kind: 'ended', result: { code: 'result_expired' } })
  t.match(lineState(chosen, null, true), { kind: 'ended', result: { code: 'batch_cancelled' } }, 'stopping')
})

t.test('the queue has it: waiting, or its result', async (t) => {
  t.same(lineState(taken, { status: 'queued' }, false), { kind: 'waiting' })
  t.same(lineState(taken, { status: 'in_progress' }, true), { kind: 'waiting' })
  const response = { status: 'completed', response: { status_code: 200, body: { ok: 1 } } }
  t.same(lineState(taken, response, false), {
    kind: 'ended',
    result: { kind: 'response', statusCode: 200, requestId: 'qreq_1', body: { ok: 1 } },
  })
})

t.test('an ended request without a reply says why', async (t) => {
  t.match(resultOf(taken, { status: 'cancelled' }), { kind: 'error', code: 'batch_cancelled' })
  t.match(resultOf(taken, { status: 'expired' }), { kind: 'error', code: 'result_expired' }, 'its result dropped')
  t.match(resultOf(taken, { status: 'failed' }), { kind: 'error', code: 'result_unavailable' }, 'not batch_expired')
  t.match(resultOf(taken, { status: 'completed' }), { kind: 'error', code: 'result_unavailable' })
  t.match(
    resultOf(taken, { status: 'failed', response: { status_code: 429, body: {} } }),
    { kind: 'response', statusCode: 429 },
    'a failure with a reply is that reply',
  )
})
