// The spans of one proxied call (tracing.ts has the port): what the call's own span says
// once it is over, in the OpenTelemetry GenAI conventions (gen_ai.*) plus the gateway's
// own (tollgate.*), and the steps under it: admission, each upstream attempt (its span is
// the parent the upstream is told of), settlement. Each helper costs one boolean test
// when the span is the no-op.
import type { BackendAdapter, Usage } from '../backends/port.ts'
import type { Endpoint } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'
import type { RequestBody } from '../http/body.ts'
import type { Admission } from '../limits/port.ts'
import type { Span, SpanAttributes } from './tracing.ts'

/** gen_ai.operation.name of the endpoints the conventions name; the others are named as the gateway names them. */
const OPERATIONS: Partial<Record<Endpoint, string>> = {
  'chat.completions': 'chat',
  completions: 'text_completion',
  embeddings: 'embeddings',
  responses: 'generate_content',
}

/** The operation of an endpoint, or of a route (`queue.chat.completions`: the drop-in's). */
export function operationOf(route: string): string {
  const endpoint = route.replace(/^queue\./, '').replace(/\.async$/, '')
  return OPERATIONS[endpoint as Endpoint] ?? endpoint
}

/** What a call's span says when it is over: who called, what was asked, what it cost, how it ended. */
export interface CallSummary {
  readonly route: string
  readonly model?: string | undefined
  readonly keyId?: string | undefined
  readonly tier?: string | undefined
  readonly backend?: string | undefined
  readonly usage?: Usage | undefined
  readonly status: number
  readonly errorName?: string | undefined
  readonly queueWaitMs?: number | undefined
}

/** Names the call's span (`chat gpt-4o`, as the conventions name a GenAI span) and ends it. */
export function endCallSpan(span: Span, call: CallSummary): void {
  if (!span.recording) return
  const operation = operationOf(call.route)
  // An accepted stored request did not call the model yet: its run's span is named for it.
  if (call.model !== undefined && !call.route.endsWith('.async')) span.rename(`${operation} ${call.model}`)
  span.set({
    ...(call.model === undefined
      ? {}
      : {
          'gen_ai.operation.name': operation,
          'gen_ai.request.model': call.model,
          'gen_ai.usage.input_tokens': call.usage?.inputTokens,
          'gen_ai.usage.output_tokens': call.usage?.outputTokens,
        }),
    'tollgate.route': call.route,
    'tollgate.key.id': call.keyId,
    'tollgate.tier': call.tier,
    'tollgate.backend': call.backend,
    'tollgate.queue.wait_ms': call.queueWaitMs,
    'http.response.status_code': call.status,
  })
  if (call.errorName !== undefined) span.fail(call.errorName)
  else if (call.status >= 500) span.fail(String(call.status))
  span.end()
}

/**
 * The admission step: how long it took (a /queue call's wait in line) and what it decided.
 * Not recording, the admission's own promise, with no async frame of its own around it.
 */
export function traceAdmission(
  span: Span | undefined,
  body: RequestBody,
  admit: () => Promise<Admission>,
): Promise<Admission> {
  return span?.recording === true ? tracedAdmission(span, body, admit) : admit()
}

async function tracedAdmission(span: Span, body: RequestBody, admit: () => Promise<Admission>): Promise<Admission> {
  if (span.captureContent && body.kind === 'json') span.set(promptAttributes(body.value))
  const step = span.child('admission', 'internal')
  const started = performance.now()
  try {
    const admission = await admit()
    note(span, step, { 'tollgate.admission.decision': 'admitted' }, started)
    return admission
  } catch (err) {
    const refusal = err instanceof GatewayError ? err.errorName : 'error'
    note(span, step, { 'tollgate.admission.decision': 'refused', 'tollgate.admission.refusal': refusal }, started)
    step.fail(refusal)
    throw err
  } finally {
    step.end()
  }
}

function note(span: Span, step: Span, decision: SpanAttributes, started: number): void {
  const attributes = { ...decision, 'tollgate.admission.wait_ms': Math.round(performance.now() - started) }
  step.set(attributes)
  span.set(attributes)
}

/**
 * The deployments of a call, each sending through a span of its own: one per upstream
 * attempt, failover and refusals included. Its context goes upstream as traceparent; it
 * ends when the upstream's reply has been read to its end (or cut).
 */
export function tracedTargets<T extends { readonly adapter: BackendAdapter; readonly upstreamModel: string | null }>(
  span: Span | undefined,
  targets: readonly T[],
): readonly T[] {
  if (span?.recording !== true) return targets
  return targets.map((target) => ({ ...target, adapter: tracedAdapter(span, target.adapter) }))
}

function tracedAdapter(span: Span, adapter: BackendAdapter): BackendAdapter {
  return {
    name: adapter.name,
    type: adapter.type,
    supports: (endpoint) => adapter.supports(endpoint),
    close: () => adapter.close(),
    async send(request) {
      const operation = operationOf(request.endpoint)
      const deployment = `${adapter.name}/${request.model ?? '-'}`
      const attempt = span.child(request.model === null ? operation : `${operation} ${request.model}`, 'client', {
        'gen_ai.operation.name': operation,
        'gen_ai.request.model': request.model ?? undefined,
        'gen_ai.provider.name': adapter.type === 'mock' ? adapter.name : adapter.type,
        'tollgate.deployment': deployment,
      })
      try {
        const response = await adapter.send({ ...request, trace: attempt.headers() })
        attempt.set({ 'http.response.status_code': response.status })
        if (response.status >= 500) attempt.fail(String(response.status))
        // The deployment whose answer is relayed (a refusal or a 5xx hands the call on, or is put back).
        if (response.status < 500 && response.status !== 429)
          span.set({ 'gen_ai.response.model': request.model ?? undefined, 'tollgate.deployment': deployment })
        if (response.body.destroyed) attempt.end()
        else response.body.once('close', () => attempt.end())
        return response
      } catch (err) {
        attempt.fail(err instanceof GatewayError ? err.errorName : 'error')
        attempt.end()
        throw err
      }
    },
  }
}

/** A step that is one piece of work (a RAG backend's request): ended with it, failed if it throws. */
export async function traceStep<T>(step: Span, work: Promise<T>, status: () => number | undefined): Promise<T> {
  if (!step.recording) return work
  try {
    return await work
  } catch (err) {
    step.fail(err instanceof GatewayError ? err.errorName : 'error')
    throw err
  } finally {
    step.set({ 'http.response.status_code': status() })
    step.end()
  }
}

/** The settlement step: the limits reconciled and the usage metered with what flowed. */
export async function traceSettlement(
  span: Span | undefined,
  usage: Usage,
  settle: () => Promise<void>,
): Promise<void> {
  if (span?.recording !== true) return settle()
  const step = span.child('settlement', 'internal', {
    'gen_ai.usage.input_tokens': usage.inputTokens,
    'gen_ai.usage.output_tokens': usage.outputTokens,
  })
  try {
    await settle()
  } finally {
    step.end()
  }
}

/** The prompt, recorded only when tracing.captureContent says so (the caller checks). */
function promptAttributes(body: unknown): SpanAttributes {
  if (typeof body !== 'object' || body === null) return {}
  const { messages, prompt, input } = body as Record<string, unknown>
  const content = messages ?? prompt ?? input
  return content === undefined ? {} : { 'gen_ai.input.messages': JSON.stringify(content) }
}

/** The completion, recorded only when tracing.captureContent says so: gathered from the reply as it is relayed. */
export interface CompletionCapture {
  /** Each parsed JSON reply or stream event (the relay's observe). */
  observe(data: unknown): void
  /** Sets gen_ai.output.messages on the call's span, once the reply is over. */
  flush(): void
}

export function captureCompletion(span: Span | undefined): CompletionCapture | undefined {
  if (span?.recording !== true || !span.captureContent) return undefined
  const messages: unknown[] = []
  const streamed: string[] = []
  return {
    observe(data) {
      const choices = (data as { choices?: unknown } | null)?.choices
      if (!Array.isArray(choices)) return
      for (const choice of choices as Array<{ index?: number; message?: unknown; delta?: { content?: unknown } }>) {
        if (choice.message !== undefined) messages.push(choice.message)
        const piece = choice.delta?.content
        if (typeof piece === 'string') streamed[choice.index ?? 0] = (streamed[choice.index ?? 0] ?? '') + piece
      }
    },
    flush() {
      const output = messages.length > 0 ? messages : streamed.map((content) => ({ role: 'assistant', content }))
      if (output.length > 0) span.set({ 'gen_ai.output.messages': JSON.stringify(output) })
    },
  }
}
