// Requests per minute per user and per tenant, on the same limiter (and so the same
// x-ratelimit-* headers and 429s) as /v2. The counters are subjects of their own:
// `rag-user:<user id>` and `rag-tenant:<tenant>`, each on a pseudo-model that names it in the 429's words;
// calls to public routes, which carry no identity, count per client address (`rag-public:<address>`).
import { NO_USAGE } from '../backends/port.ts'
import type { Identity } from '../auth/identity.ts'
import type { RagConfig } from '../config/schema.ts'
import type { Admission, Limiter, RateLimitHeaders } from '../limits/port.ts'

export const RAG_USER_MODEL = 'the RAG gateway (per user)'
export const RAG_TENANT_MODEL = 'the RAG gateway (per tenant)'
export const RAG_PUBLIC_MODEL = "the RAG gateway's public routes (per client address)"

/** Admits the call on both counters, or throws the limiter's 429. Answers the headers of the tighter one. */
export async function admitRagCall(limiter: Limiter, rag: RagConfig, identity: Identity): Promise<RateLimitHeaders> {
  const tenant = rag.limits.tenants[identity.tenant]
  const userRpm = tenant?.userRpm ?? rag.limits.userRpm
  const tenantRpm = tenant?.tenantRpm ?? rag.limits.tenantRpm
  const admissions: Admission[] = []
  if (userRpm > 0) admissions.push(await admitRpm(limiter, `rag-user:${identity.userId}`, RAG_USER_MODEL, userRpm))
  if (tenantRpm > 0)
    admissions.push(await admitRpm(limiter, `rag-tenant:${identity.tenant}`, RAG_TENANT_MODEL, tenantRpm))
  // Nothing to reconcile: a RAG call is counted, not metered in tokens.
  for (const admission of admissions) void admission.settle(NO_USAGE)
  const remaining = (h: RateLimitHeaders): number => Number(h['x-ratelimit-remaining-requests'] ?? Infinity)
  return (
    admissions
      .map((a) => a.headers)
      .reduce<RateLimitHeaders | undefined>(
        (tight, h) => (tight === undefined || remaining(h) < remaining(tight) ? h : tight),
        undefined,
      ) ?? {}
  )
}

/** Admits a call to a public route on its client address's counter, or throws the limiter's 429. */
export async function admitPublicRagCall(limiter: Limiter, rag: RagConfig, address: string): Promise<RateLimitHeaders> {
  if (rag.limits.publicRpm <= 0) return {}
  const admission = await admitRpm(limiter, `rag-public:${address}`, RAG_PUBLIC_MODEL, rag.limits.publicRpm)
  void admission.settle(NO_USAGE)
  return admission.headers
}

/** One RAG counter: requests only, on the pseudo-model that names it in a 429. */
function admitRpm(limiter: Limiter, keyId: string, model: string, rpm: number): Promise<Admission> {
  return limiter.admit({ keyId, tier: 'rag', model, limits: { rpm }, estimate: NO_USAGE })
}
