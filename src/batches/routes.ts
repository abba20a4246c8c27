// /v2/batches and /v1/batches (OpenAI's Batch API): create, retrieve, list, cancel. A
// batch is its owner's: any other key's caller gets 404, as for a file or a stored request.
import { randomBytes } from 'node:crypto'
import { gatewayError } from '../errors.ts'
import { readJsonBody } from '../http/body.ts'
import { parseQuery } from '../http/query.ts'
import { sendJson } from '../http/reply.ts'
import type { Router } from '../http/router.ts'
import type { OpenCall } from '../inference/caller.ts'
import { checkEndpointScope } from '../inference/scopes.ts'
import type { RuntimeSource } from '../runtime/snapshot.ts'
import type { OwnershipStore } from '../store/ports.ts'
import { batchView, CreateBatchBody, listBatchesQuery } from './api.ts'
import { fileRecord } from './files.ts'
import { batchEndpointOf } from './input.ts'
import { newBatchRecord, type BatchRecord, type BatchStore } from './port.ts'
import { batchCapsOf } from './caps.ts'
import type { BatchRunner } from './runner.ts'

export interface BatchRouteDeps {
  readonly store: BatchStore
  readonly runner: Pick<BatchRunner, 'poke'>
  readonly ownership: OwnershipStore
  readonly runtime: RuntimeSource
  readonly jsonBodyLimitBytes: number
}

const WINDOW_MS = 24 * 3600 * 1000
const noStore = { 'cache-control': 'no-store' }

const notFound = (param: string, what: string): Error =>
  gatewayError('resource_not_found', { message: `No such ${what}.`, param })

export function registerBatchRoutes(router: Router, openCall: OpenCall, deps: BatchRouteDeps): void {
  const { store } = deps

  async function owned(id: string, owner: string): Promise<BatchRecord> {
    const record = /^batch_[\w-]{1,64}$/.test(id) ? await store.get(id) : null
    // Another owner's batch does not exist, as far as this caller can tell.
    if (record === null || record.owner !== owner) throw notFound('batch_id', 'batch')
    return record
  }

  for (const prefix of ['/v2', '/v1']) {
    router.on('POST', `${prefix}/batches`, async (ctx) => {
      const principal = await openCall(ctx, 'batches.create')
      const parsed = CreateBatchBody.safeParse((await readJsonBody(ctx.req, deps.jsonBodyLimitBytes)).value)
      if (!parsed.success) {
        const issue = parsed.error.issues[0]
        throw gatewayError('invalid_body', {
          message: `Invalid body: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}.`,
          param: issue?.path.join('.') || null,
        })
      }
      const body = parsed.data
      const endpoint = batchEndpointOf(body.endpoint)
      if (endpoint === undefined) throw gatewayError('invalid_body', { param: 'endpoint' })
      checkEndpointScope(principal, endpoint)
      if ((await deps.ownership.ownerOf('file', body.input_file_id)) !== principal.owner)
        throw notFound('input_file_id', 'file')
      const runtime = deps.runtime.current
      const caps = batchCapsOf(runtime.config.plans, principal.key)
      const file = await fileRecord(runtime, body.input_file_id)
      if (file === null) throw notFound('input_file_id', 'file')
      if (file.purpose !== 'batch')
        throw gatewayError('batch_input_invalid', {
          message: `The input file was uploaded with purpose "${file.purpose === 'fine-tune' ? 'fine-tune' : 'other'}"; a batch's input file must have purpose "batch".`,
        })
      if (file.bytes > caps.maxFileBytes)
        throw gatewayError('batch_input_invalid', {
          message: `The input file holds ${file.bytes} bytes; a batch's input file may hold ${caps.maxFileBytes}.`,
        })
      const now = Date.now()
      const record = newBatchRecord({
        id: `batch_${randomBytes(12).toString('hex')}`,
        owner: principal.owner,
        keyId: principal.keyId,
        endpoint,
        endpointPath: body.endpoint,
        inputFileId: body.input_file_id,
        completionWindow: body.completion_window,
        metadata: body.metadata ?? null,
        createdAt: now,
        expiresAt: now + WINDOW_MS,
      })
      if (!(await store.create(record, caps.maxOpen)))
        throw gatewayError('batch_limit', {
          message: `This key has ${caps.maxOpen} batches not yet finished, as many as it may; wait for one to end or cancel one.`,
        })
      ctx.log.info({ batchId: record.id }, 'batch created')
      deps.runner.poke()
      sendJson(ctx.res, 200, batchView(record), noStore)
    })

    router.on('GET', `${prefix}/batches`, async (ctx, _params, query) => {
      const principal = await openCall(ctx, 'batches.list')
      const { limit, after } = parseQuery(listBatchesQuery, query)
      const page = await store.list(principal.owner, { after, limit: limit ?? 20 })
      sendJson(
        ctx.res,
        200,
        {
          object: 'list',
          data: page.data.map(batchView),
          first_id: page.data[0]?.id ?? null,
          last_id: page.data.at(-1)?.id ?? null,
          has_more: page.hasMore,
        },
        noStore,
      )
    })

    router.on('GET', `${prefix}/batches/:batch_id`, async (ctx, params) => {
      const principal = await openCall(ctx, 'batches.retrieve')
      sendJson(ctx.res, 200, batchView(await owned(params.batch_id ?? '', principal.owner)), noStore)
    })

    router.on('POST', `${prefix}/batches/:batch_id/cancel`, async (ctx, params) => {
      const principal = await openCall(ctx, 'batches.cancel')
      const record = await owned(params.batch_id ?? '', principal.owner)
      if (record.status !== 'validating' && record.status !== 'in_progress' && record.status !== 'cancelling')
        throw gatewayError('conflict', {
          message: `The batch has already ended (${record.status}); there is nothing to cancel.`,
          headers: { 'x-should-retry': 'false' },
        })
      const cancelled = (await store.cancel(record.id, Date.now())) ?? record
      ctx.log.info({ batchId: record.id }, 'batch cancel asked')
      deps.runner.poke()
      sendJson(ctx.res, 200, batchView(cancelled), noStore)
    })
  }
}
