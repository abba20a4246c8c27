// GET /: what a person (or a curl) that opens the gateway's address finds, instead of a 404:
// where the API, its reference, the models and the portal are.
import { z } from 'zod'
import type { OperationDoc } from '../openapi/operation.ts'
import { sendJson } from './reply.ts'
import type { Router } from './router.ts'

const FrontDoor = z.object({
  object: z.literal('tollgate'),
  message: z.string(),
  links: z
    .record(z.string(), z.string())
    .meta({ description: 'Where things are, by name: the API bases, its reference, the models, the portal.' }),
})

export const FRONT_DOOR_OPERATIONS: readonly OperationDoc[] = [
  {
    method: 'get',
    path: '/',
    operationId: 'frontDoor',
    summary: 'Where the API, its reference, the models and the portal are',
    tag: 'Health',
    security: 'none',
    responses: { 200: { description: "The gateway's front door", schema: FrontDoor } },
  },
]

/** Registered beside the probes, on the same kind of router (GET routes of the gateway's own). */
export function registerFrontDoor(router: Router, options: { readonly portal: boolean }): void {
  const links: Record<string, string> = {
    inference: "/v2 (the OpenAI SDK's baseURL: http://<host>:<port>/v2)",
    files_and_vector_stores: '/v1',
    queue: '/queue',
    models: '/v2/models',
    api_reference: '/redoc',
    openapi: '/openapi.json',
    ...(options.portal ? { portal: '/portal' } : {}),
    health: '/healthz',
  }
  router.on('GET', '/', async (ctx) => {
    ctx.route = 'front_door'
    sendJson(ctx.res, 200, {
      object: 'tollgate',
      message:
        'This is a Tollgate gateway. Inference is under /v2, files and vector stores under /v1; the API reference is at /redoc.',
      links,
    })
  })
}
