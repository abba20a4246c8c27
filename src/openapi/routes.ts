// /openapi.json (the gateway's own OpenAPI 3.1 document), /redoc (the interactive
// reference) and the Redoc bundle the page loads. Public, like the document's content:
// it describes the API, never a key or a configuration value.
import { createHash } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { z } from 'zod'
import type { Router } from '../http/router.ts'
import type { OpenApiDocument } from './document.ts'
import type { OperationDoc } from './operation.ts'
import { REDOC_BUNDLE_PATH, REDOC_CSP, REDOC_PAGE_PATH, redocBundle, redocPage, type RedocBundle } from './redoc.ts'

export const OPENAPI_PATH = '/openapi.json'

const TAG = 'API reference'

export const REFERENCE_OPERATIONS: readonly OperationDoc[] = [
  {
    method: 'get',
    path: OPENAPI_PATH,
    operationId: 'openapi',
    tag: TAG,
    security: 'none',
    summary: 'This document (OpenAPI 3.1)',
    description: 'Also printed by `tollgate openapi`, for client generators.',
    responses: { 200: { description: 'The document', schema: z.object({ openapi: z.string() }).loose() } },
  },
  {
    method: 'get',
    path: REDOC_PAGE_PATH,
    operationId: 'redoc',
    tag: TAG,
    security: 'none',
    summary: 'The interactive reference (Redoc)',
    responses: { 200: { description: 'An HTML page', contentType: 'text/html' } },
  },
  {
    method: 'get',
    path: REDOC_BUNDLE_PATH,
    operationId: 'redocBundle',
    tag: TAG,
    security: 'none',
    summary: 'The Redoc bundle the reference page loads',
    responses: { 200: { description: 'JavaScript', contentType: 'text/javascript' } },
  },
]

const bundleVersion = (bundle: RedocBundle): string => bundle.etag.slice(1, 13)

function notModified(req: IncomingMessage, etag: string): boolean {
  const header = req.headers['if-none-match']
  return header !== undefined && header.split(',').some((tag) => tag.trim() === etag || tag.trim() === `W/${etag}`)
}

function send(
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer,
  headers: Record<string, string>,
  etag: string,
): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value)
  res.setHeader('etag', etag)
  res.setHeader('x-content-type-options', 'nosniff')
  if (notModified(req, etag)) {
    res.statusCode = 304
    res.end()
    return
  }
  res.statusCode = 200
  res.setHeader('content-length', body.length)
  res.end(body)
}

/** `document`: built (and its catalogue loaded) on the first request, not at boot. */
export function registerReferenceRoutes(router: Router, document: () => Promise<OpenApiDocument>): void {
  let served: { bytes: Buffer; etag: string } | undefined
  const documentBytes = async (): Promise<{ bytes: Buffer; etag: string }> => {
    if (served === undefined) {
      const bytes = Buffer.from(JSON.stringify(await document()), 'utf8')
      served = { bytes, etag: `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"` }
    }
    return served
  }

  router.on('GET', OPENAPI_PATH, async (ctx) => {
    ctx.route = 'openapi'
    const { bytes, etag } = await documentBytes()
    send(
      ctx.req,
      ctx.res,
      bytes,
      {
        'content-type': 'application/json; charset=utf-8',
        // Client generators and other origins' tools may read it; it holds nothing private.
        'access-control-allow-origin': '*',
        'cache-control': 'no-cache',
      },
      etag,
    )
  })

  router.on('GET', REDOC_PAGE_PATH, async (ctx) => {
    ctx.route = 'redoc'
    const bundle = await redocBundle()
    const page = Buffer.from(redocPage(bundleVersion(bundle)), 'utf8')
    send(
      ctx.req,
      ctx.res,
      page,
      {
        'content-type': 'text/html; charset=utf-8',
        'content-security-policy': REDOC_CSP,
        'referrer-policy': 'no-referrer',
        'cache-control': 'no-cache',
      },
      `"${createHash('sha256').update(page).digest('base64url').slice(0, 27)}"`,
    )
  })

  router.on('GET', REDOC_BUNDLE_PATH, async (ctx, _params, query) => {
    ctx.route = 'redoc.bundle'
    const bundle = await redocBundle()
    send(
      ctx.req,
      ctx.res,
      bundle.bytes,
      {
        'content-type': 'text/javascript; charset=utf-8',
        // The page asks for it with its version in the query: a new bundle is a new URL, so
        // that one is kept for good; asked for otherwise, it is checked again now and then.
        'cache-control':
          query.get('v') === bundleVersion(bundle) ? 'public, max-age=31536000, immutable' : 'public, max-age=300',
      },
      bundle.etag,
    )
  })
}
