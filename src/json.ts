// Untrusted JSON is `unknown` until checked; this is the one check for "a JSON object".

export type JsonObject = Record<string, unknown>

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
