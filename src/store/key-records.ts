// How both adapters store, filter and order key records, so they agree exactly.
import type { KeyRecord } from '../keys/record.ts'
import type { KeyFilter } from './ports.ts'
import { isJsonObject } from '../json.ts'

export function encodeKeyRecord(record: KeyRecord): string {
  return JSON.stringify(record)
}

const isString = (v: unknown): v is string => typeof v === 'string'
const isNullableString = (v: unknown): v is string | null => v === null || typeof v === 'string'
const isNullableStringArray = (v: unknown): boolean => v === null || (Array.isArray(v) && v.every(isString))

/** Parses a stored record; throws if the stored text is not one (a corrupt or foreign value). */
export function decodeKeyRecord(text: string): KeyRecord {
  const value: unknown = JSON.parse(text)
  if (
    isJsonObject(value) &&
    isString(value.id) &&
    isString(value.hash) &&
    isNullableString(value.previousHash) &&
    isNullableString(value.previousHashValidUntil) &&
    isString(value.prefix) &&
    isNullableString(value.name) &&
    isNullableString(value.owner) &&
    isNullableString(value.tier) &&
    isNullableStringArray(value.models) &&
    isNullableStringArray(value.endpoints) &&
    (value.limits === null || isJsonObject(value.limits)) &&
    (value.status === 'active' || value.status === 'revoked') &&
    isString(value.createdAt) &&
    isString(value.updatedAt) &&
    isNullableString(value.expiresAt) &&
    isNullableString(value.revokedAt)
  ) {
    // Every field is checked above; the limits' inner shape is what insert() was given.
    return value as unknown as KeyRecord
  }
  throw new TypeError('stored key record is malformed')
}

/** A stable text of any JSON value: object keys sorted at every depth, undefined fields dropped. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonical(v === undefined ? null : v)).join(',')}]`
  if (isJsonObject(value)) {
    const fields = Object.keys(value)
      .sort()
      .flatMap((key) => (value[key] === undefined ? [] : [`${JSON.stringify(key)}:${canonical(value[key])}`]))
    return `{${fields.join(',')}}`
  }
  return JSON.stringify(value)
}

/**
 * True when two records are the same record, field for field (as stored: the order of an
 * object's keys does not count, the order of a list does). replace() compares with this.
 */
export function sameKeyRecord(a: KeyRecord, b: KeyRecord): boolean {
  return canonical(a) === canonical(b)
}

/** The hashes a record answers to: its current one and, during a rotation, the previous one. */
export function hashesOf(record: KeyRecord): string[] {
  return record.previousHash === null || record.previousHash === record.hash
    ? [record.hash]
    : [record.hash, record.previousHash]
}

export function matchesFilter(record: KeyRecord, filter: KeyFilter): boolean {
  return (
    (filter.owner === undefined || record.owner === filter.owner) &&
    (filter.tier === undefined || record.tier === filter.tier) &&
    (filter.status === undefined || record.status === filter.status)
  )
}

/** list() order: oldest first, then by id. */
export function compareKeyRecords(a: KeyRecord, b: KeyRecord): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0
}
